"""gunicorn settings for the HTTP benchmark: the production settings, but a synthetic cache, no engine.

Usage (from the repository root, as ``bench/bench_api.py`` does)::

    BENCH_TASKS=10000 SERVICE_LISTEN_ADDR=127.0.0.1:8123 gunicorn -c bench/gunicorn_synthetic.py wsgi:app

Every server setting (worker class, worker count, connections, keep-alive, timeouts, log config) is read
from the repository's ``gunicorn.conf.py`` so the benchmark measures what production runs. Only the
worker hooks differ: ``post_worker_init`` fills the cache with the synthetic snapshot instead of starting
the watcher, so nothing talks to an engine and the cache never changes during the measurement.
"""

from __future__ import annotations

import os
import runpy
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
_production = runpy.run_path(str(_ROOT / "gunicorn.conf.py"))

bind = _production["bind"]
worker_class = _production["worker_class"]
workers = _production["workers"]
worker_connections = _production["worker_connections"]
timeout = _production["timeout"]
graceful_timeout = _production["graceful_timeout"]
keepalive = _production["keepalive"]
preload_app = _production["preload_app"]
logconfig_dict = _production["logconfig_dict"]
# Building 50k tasks in the worker takes a few seconds; the arbiter must not kill it meanwhile.
timeout = max(timeout, 120)


def _task_count() -> int:
    return int(os.environ.get("BENCH_TASKS", "10000"))


def post_worker_init(worker: Any) -> None:
    """Load the synthetic snapshot into this worker's cache; the Runtime (watcher) is never started."""
    from app.heap import settle
    from app.runtime import runtime_of
    from bench.synthetic import ClusterShape, build_snapshot

    started = time.monotonic()
    snapshot = build_snapshot(ClusterShape(tasks=_task_count()))
    runtime_of(worker.wsgi).cache.replace_all(snapshot, duration=time.monotonic() - started)
    settle()            # as the watcher does after a full sync: full collections then skip the cache


def worker_exit(server: Any, worker: Any) -> None:
    """Nothing to stop: the runtime was never started."""
