"""gunicorn settings for the SSE fan-out benchmark: ``bench/gunicorn_synthetic.py`` (production settings, a
synthetic cache, no engine) plus an in-process change driver, so a change's time is taken where it happens.

The driver (a greenlet in the worker) waits until ``BENCH_SSE_CLIENTS`` streams are open (at most 120 s),
then writes ``BENCH_SSE_RATE`` service updates per second for ``BENCH_SSE_SECONDS`` through
``Cache.upsert``; each update carries its wall-clock time in the label ``bench.sent`` and its number in
``bench.seq``, which the clients read back from the events. One last update carries ``bench.done``.
It exists only in this benchmark configuration: the application has no such hook.
"""

from __future__ import annotations

import copy
import os
import runpy
import time
from pathlib import Path
from typing import Any

import gevent

_ROOT = Path(__file__).resolve().parent.parent
_synthetic = runpy.run_path(str(_ROOT / "bench" / "gunicorn_synthetic.py"))

bind = _synthetic["bind"]
worker_class = _synthetic["worker_class"]
workers = _synthetic["workers"]
worker_connections = _synthetic["worker_connections"]
timeout = _synthetic["timeout"]
graceful_timeout = 2
keepalive = _synthetic["keepalive"]
preload_app = _synthetic["preload_app"]
logconfig_dict = _synthetic["logconfig_dict"]


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def _drive(app: Any) -> None:
    from app.resources import ResourceKind
    from app.runtime import runtime_of
    from app.streams.response import hub_of

    cache, hub = runtime_of(app).cache, hub_of(app)
    clients, rate, seconds = int(_env("BENCH_SSE_CLIENTS", 256)), _env("BENCH_SSE_RATE", 100), \
        _env("BENCH_SSE_SECONDS", 10)
    deadline = time.monotonic() + 120
    while hub.open_streams < clients and time.monotonic() < deadline:
        gevent.sleep(0.1)
    gevent.sleep(1.0)
    services = [entry.raw for entry in cache.entries(ResourceKind.SERVICE)[:50]]
    count = int(rate * seconds)
    started = time.monotonic()
    for number in range(count + 1):
        gevent.sleep(max(0.0, started + number / rate - time.monotonic()))
        raw = copy.deepcopy(services[number % len(services)])
        raw["Version"] = {"Index": raw["Version"]["Index"] + 1_000_000 + number}
        labels = raw["Spec"].setdefault("Labels", {})
        labels["bench.seq"] = str(number)
        labels["bench.sent"] = repr(time.time())
        if number == count:
            labels["bench.done"] = "1"
        services[number % len(services)] = raw
        cache.upsert(ResourceKind.SERVICE, raw)


def post_worker_init(worker: Any) -> None:
    _synthetic["post_worker_init"](worker)
    gevent.spawn(_drive, worker.wsgi)


def worker_exit(server: Any, worker: Any) -> None:
    """Nothing to stop: the runtime was never started."""
