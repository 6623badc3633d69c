"""Helpers shared by the unit tests: a bounded wait, fast watcher timings, and an app wired to a FakeEngine.

``create_app`` is imported lazily so the cache and engine tests do not depend on the HTTP layer importing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import gevent

from app.cache.store import Cache
from app.engine.watcher import WatcherSettings
from tests.fakes import FakeEngine

if TYPE_CHECKING:
    from flask import Flask

    from app.runtime import Runtime

T = TypeVar("T")

# Short windows so that event handling, backoff and reconnection take milliseconds in tests.
FAST = WatcherSettings(coalesce_window=0.01, inspectors=4, task_poll_interval=0.2, task_debounce=0.01,
                       resync_interval=300.0, backoff_initial=0.02, backoff_max=0.1)


def wait_until(condition: Callable[[], T], timeout: float = 5.0, interval: float = 0.01,
               message: str = "condition") -> T:
    """Poll ``condition`` (yielding to other greenlets) until it is truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        gevent.sleep(interval)   # the poll interval of this bounded wait


@dataclass
class Harness:
    app: Flask
    runtime: Runtime
    engine: FakeEngine

    @property
    def cache(self) -> Cache:
        return self.runtime.cache

    def start(self, timeout: float = 5.0) -> None:
        self.runtime.start()
        wait_until(lambda: self.cache.freshness.synced, timeout, message="the first full sync")

    def stop(self) -> None:
        self.runtime.stop()


def attach_engine(runtime: Runtime, engine: FakeEngine, **timings: Any) -> None:
    """Make the runtime's watcher talk to ``engine`` with fast backoff and coalescing."""
    watcher = runtime.watcher
    watcher._connect = lambda: engine  # type: ignore[method-assign]
    watcher._settings = replace(watcher._settings, coalesce_window=FAST.coalesce_window,
                                task_debounce=FAST.task_debounce, backoff_initial=FAST.backoff_initial,
                                backoff_max=FAST.backoff_max, **timings)


def build_harness(engine: FakeEngine, **settings: Any) -> Harness:
    from app import create_app
    from app.config import Settings
    from app.runtime import runtime_of

    settings = {"data_dir": ":memory:", **settings}   # no state store unless a test asks for one
    app = create_app(Settings(**settings), configure_logging=False)
    runtime = runtime_of(app)
    attach_engine(runtime, engine)
    return Harness(app, runtime, engine)
