"""What freezing the heap (app/heap.py) buys and what it costs, in one worker-like process.

Serves a synthetic 10,000-task cache with gevent's WSGI server on 127.0.0.1, churns keep-alive clients
(each opens a connection, makes a few list and detail requests, closes it) while ``heap.settle()`` runs
every ``--settle-every`` seconds as the watcher's bulk writes would, then reports:
- the time of a full collection with the cache frozen and without (the stall it removes);
- ``frozen_garbage``: unreachable objects that were alive at a freeze and died after it (what freezing
  leaks: reference cycles among them are never reclaimed), and their share of the requests served.

Run: ``.venv/bin/python -m gevent.monkey bench/bench_heap.py [--seconds 20 --clients 50]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import time
from pathlib import Path

import gevent
import gevent.pywsgi
import requests

from app import heap
from bench.bench_api import loaded_app
from bench.synthetic import ClusterShape, build_snapshot


def full_collection_ms() -> float:
    started = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--settle-every", type=float, default=1.0)
    args = parser.parse_args()

    app = loaded_app(build_snapshot(ClusterShape(tasks=args.tasks)))
    server = gevent.pywsgi.WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    base = f"http://127.0.0.1:{server.server_port}"
    task_id = requests.get(f"{base}/tasks?limit=1", timeout=10).json()["items"][0]["@id"].rsplit("/", 1)[-1]
    gc.collect()
    unfrozen_ms = min(full_collection_ms() for _ in range(3))
    heap.settle()
    frozen_ms = min(full_collection_ms() for _ in range(3))

    served, deadline = [0], time.monotonic() + args.seconds

    def client() -> None:
        while time.monotonic() < deadline:
            with requests.Session() as session:
                for path in ("/tasks?limit=20", f"/tasks/{task_id}", "/services?limit=5", "/nodes"):
                    session.get(base + path, timeout=30).raise_for_status()
                    served[0] += 1

    def settler() -> None:
        while time.monotonic() < deadline:
            gevent.sleep(args.settle_every)
            heap.settle()

    gevent.joinall([gevent.spawn(settler), *(gevent.spawn(client) for _ in range(args.clients))])
    server.stop()
    leaked = heap.frozen_garbage()
    result = {
        "tasks": args.tasks, "seconds": args.seconds, "clients": args.clients, "requests": served[0],
        "settles": int(args.seconds / args.settle_every),
        "full_collection_ms_unfrozen": round(unfrozen_ms, 1), "full_collection_ms_frozen": round(frozen_ms, 1),
        "frozen_garbage_objects": leaked,
        "frozen_garbage_per_1000_requests": round(leaked * 1000 / max(1, served[0]), 2),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(result, indent=2))
    out = Path("bench/results/heap.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
