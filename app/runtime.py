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

from app.acl.source import PolicySource
from app.cache.store import Cache
from app.config import Settings
from app.engine.client import DockerEngine, EngineClient
from app.engine.watcher import Watcher, WatcherSettings
from app.engine.writes import EngineWriter
from app.query.search import SearchIndex
from app.recommendations.engine import EngineSettings, RecommendationEngine
from app.store.database import store_path
from app.store.persister import Persister
from app.writes.audit import AuditLog

log = logging.getLogger(__name__)
EXTENSION_KEY = "shoal"


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
        self.store = Persister(self.cache, store_path(settings.data_dir)) if settings.persistence else None
        self.started_at = time.time()
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
        self.policy.start()
        if self.store is not None:
            self.store.start()             # restores the cache before anything reads or writes it
        if self.settings.recommendations:
            self.recommendations.start()   # before the watcher: the first sync is its first batch
        self.watcher.start()
        self._running = True

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.watcher.stop()
        if self.store is not None:
            self.store.stop()              # after the watcher: every change it made is written
        self.recommendations.stop()
        self.writer.close()
        self.policy.stop()
        log.info("runtime stopped")


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
