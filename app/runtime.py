"""Runtime: the long-lived objects of one worker process (engine client, cache, watcher).

Created by ``create_app`` without any I/O and stored in ``app.extensions``; started by gunicorn's
``post_worker_init`` hook (or a test fixture, or the ``shoal`` command), stopped in ``worker_exit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from flask import Flask, current_app
from gevent.event import Event

from app.acl.source import PolicySource
from app.cache.history import sequence_base
from app.cache.store import Cache
from app.config import Settings
from app.engine.client import DockerEngine, EngineClient
from app.engine.watcher import Watcher, WatcherSettings
from app.engine.writes import EngineWriter
from app.query.search import SearchIndex
from app.recommendations.engine import EngineSettings, RecommendationEngine
from app.store.database import store_path
from app.store.health import StoreState, StoreStatus
from app.store.lock import DataDirInUse
from app.store.persister import Persister
from app.writes.audit import AuditLog

log = logging.getLogger(__name__)
EXTENSION_KEY = "shoal"
EXIT_DATA_DIR_IN_USE = 3   # gunicorn's WORKER_BOOT_ERROR: the master stops instead of respawning the worker
# The watcher's greenlets get this long to end before being killed (a hung engine call must not eat the
# graceful timeout the store needs to close: gunicorn.conf.py STOP_BUDGET).
WATCHER_STOP_TIMEOUT = 2.0


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cache = Cache(settings.history_size, settings.history_max_bytes)
        self.watcher = Watcher(self._connect, self.cache, WatcherSettings(
            task_poll_interval=settings.task_poll_interval, resync_interval=settings.resync_interval))
        self.search = SearchIndex(self.cache)
        self.recommendations = RecommendationEngine(self.cache, EngineSettings(
            debounce=settings.recommendations_debounce, prometheus_url=settings.prometheus_url))
        self.writer = EngineWriter(settings.docker_host, settings.docker_api_version,
                                   settings.writes_timeout)   # request greenlets' writes
        self.audit = AuditLog(self.cache)
        self.policy = PolicySource(settings)   # the ACL policy (None without one); hot-reloaded from its file
        self.store = Persister(self.cache, store_path(settings.data_dir), ring_size=settings.history_size,
                               retention=settings.history_retention,
                               max_history_bytes=settings.history_archive_max_bytes) if settings.persistence else None
        self.started_at = time.time()
        self.binds: tuple[str, ...] = (str(settings.listen_addr),)   # gunicorn sets what it really binds
        # Set at SIGTERM (``drain``), before the connections drain: requests that wait (``Prefer: wait``)
        # answer at once with what they have, so the graceful stop is not spent waiting for them.
        self.draining = Event()
        self._stopped = Event()   # set once a stop has finished (a second caller waits for the first)
        self.started = False
        self._running = False

    def _connect(self) -> EngineClient:
        return DockerEngine(self.settings.docker_host, self.settings.docker_api_version)

    @property
    def running(self) -> bool:
        return self._running

    @property
    def history_epoch(self) -> int:
        """When the current change sequence started (whole seconds): the store's, which survives restarts,
        else this process's start. Feed entry ids carry it, so numbers of another sequence never collide."""
        store_epoch = self.store.epoch if self.store is not None else None
        return int(self.started_at) if store_epoch is None else store_epoch

    def start(self) -> None:
        if self._running:
            return
        log.info("runtime starting", extra={"docker_host": self.settings.docker_host})
        self._start_store()
        self.policy.start()
        if self.settings.recommendations:
            self.recommendations.start()   # before the watcher: the first sync is its first batch
        self.watcher.start()
        self._stopped.clear()
        self.started = True
        self._running = True

    def store_status(self) -> StoreStatus:
        """The state store's health for readiness and metrics (``off`` when persistence is disabled)."""
        return StoreStatus(StoreState.OFF) if self.store is None else self.store.status()

    def _start_store(self) -> None:
        """Restore the cache before anything reads or writes it. Without a persisted sequence (persistence
        off, or the file unavailable) a new one starts above every number an earlier one handed out, so an
        old ``Last-Event-ID`` gets ``sync``. A data directory held by another service ends the process with
        one line (``EXIT_DATA_DIR_IN_USE``): two services must not write one file, nor wait on each other."""
        try:
            restored = self.store is not None and self.store.start()
        except DataDirInUse as exc:
            log.critical("shoal cannot start: %s; stop it or give this service another storage.data_dir", exc,
                         extra={"data_dir": self.settings.data_dir})
            raise SystemExit(EXIT_DATA_DIR_IN_USE) from None
        if not restored and not self.cache.history.last_seq:
            self.cache.history.restore((), sequence_base())

    def drain(self) -> None:
        """The worker is stopping (SIGTERM): end every wait of a request (``Prefer: wait``) now."""
        self.draining.set()

    def stop(self) -> None:
        """Stop everything, the store last but one; a call while another stop runs waits for it to end."""
        if not self._running:
            if self.started:
                self._stopped.wait()
            return
        self._running = False
        began = time.monotonic()
        try:
            self.watcher.stop(timeout=WATCHER_STOP_TIMEOUT)
            if self.store is not None:
                self.store.stop()              # after the watcher: every change it made is written
            self.recommendations.stop()
            self.writer.close()
            self.policy.stop()
        finally:
            self._stopped.set()
        log.info("runtime stopped", extra={"duration_ms": round((time.monotonic() - began) * 1000, 1)})


def runtime_of(app: Flask) -> Runtime:
    runtime = app.extensions[EXTENSION_KEY]
    assert isinstance(runtime, Runtime)
    return runtime


def current_runtime() -> Runtime:
    return runtime_of(current_app)


T = TypeVar("T")


def app_engine(key: str, kind: type[T], make: Callable[[Settings], T]) -> T:
    """An engine helper of the current app, made on first use (inside the worker, never before gunicorn
    forks and gevent patches) from the settings, and kept in ``app.extensions`` under ``key``."""
    engine = current_app.extensions.get(key)
    if engine is None:
        engine = current_app.extensions[key] = make(current_runtime().settings)
    assert isinstance(engine, kind)
    return engine
