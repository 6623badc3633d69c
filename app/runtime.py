"""Runtime: the long-lived objects of one worker process (engine client, cache, watcher).

Created by ``create_app`` without any I/O and stored in ``app.extensions``; started by gunicorn's
``post_worker_init`` hook (or a test fixture, or the ``shoal`` command), stopped in ``worker_exit``.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, current_app

from app.cache.store import Cache
from app.config import Settings
from app.engine.client import DockerEngine, EngineClient
from app.engine.watcher import Watcher, WatcherSettings

log = logging.getLogger(__name__)
EXTENSION_KEY = "shoal"


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cache = Cache(settings.history_size, settings.history_max_bytes)
        self.watcher = Watcher(self._connect, self.cache, WatcherSettings(
            task_poll_interval=settings.task_poll_interval, resync_interval=settings.resync_interval))
        self.started_at = time.time()
        self._running = False

    def _connect(self) -> EngineClient:
        return DockerEngine(self.settings.docker_host, self.settings.docker_api_version)

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        if self._running:
            return
        log.info("runtime starting", extra={"docker_host": self.settings.docker_host})
        self.watcher.start()
        self._running = True

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.watcher.stop()
        log.info("runtime stopped")


def runtime_of(app: Flask) -> Runtime:
    runtime = app.extensions[EXTENSION_KEY]
    assert isinstance(runtime, Runtime)
    return runtime


def current_runtime() -> Runtime:
    return runtime_of(current_app)
