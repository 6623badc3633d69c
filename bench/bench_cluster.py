"""Cost of the cluster-wide reads on a synthetic cluster (default: 100 nodes, 1,000 services, 10,000 tasks).

    .venv/bin/python -m gevent.monkey bench/bench_cluster.py [--tasks 10000] [--runs 200]

In-process, as ``bench/bench_api.py`` section a: the production app with its cache filled directly by
``Cache.replace_all`` (no watcher), requests through the Flask test client, so a row is the application's
own cost (view, JSON, ETag) without sockets. The heap is settled after the fill (``app.heap.settle``, as
the watcher does after a full sync), so full collections do not walk the cache. Each row: p50, p99 and max
over ``--runs`` calls after a warm-up; plus, for ``/cluster``, the pure computation
(``app.cluster.overview.overview``) alone. Results go to ``bench/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

from app import create_app, heap
from app.cluster.overview import overview
from app.config import Settings
from app.resources import ResourceKind
from app.runtime import runtime_of
from bench.synthetic import ClusterShape, build_snapshot
from bench.timing import percentile

RESULTS = Path(__file__).resolve().parent / "results" / "cluster.json"
PATHS = ("/cluster", "/cluster/capacity", "/stacks/summary", "/topology", "/topology.graphml", "/topology.dot",
         "/topology/networks", "/topology/placement")
WARMUP = 5
MAX_SECONDS = 60.0   # per row: fewer runs rather than an endless bench


def timed(operation: Callable[[], object], runs: int) -> dict[str, float | int]:
    for _ in range(WARMUP):
        operation()
    samples: list[float] = []
    deadline = time.monotonic() + MAX_SECONDS
    for _ in range(runs):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
        if time.monotonic() > deadline:
            break
    return {"p50_ms": round(percentile(samples, 50) * 1000, 2), "p99_ms": round(percentile(samples, 99) * 1000, 2),
            "max_ms": round(max(samples) * 1000, 2), "runs": len(samples)}


def request(client: Any, path: str) -> Callable[[], int]:
    def call() -> int:
        response = client.get(path)
        if response.status_code != 200:
            raise SystemExit(f"GET {path}: {response.status_code} {response.get_data(as_text=True)[:300]}")
        return len(response.get_data())
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    snapshot = build_snapshot(ClusterShape(tasks=args.tasks))
    app = create_app(Settings(log_level="warn"), configure_logging=False)
    cache = runtime_of(app).cache
    cache.replace_all(snapshot)
    heap.settle()   # as the watcher does after a full sync: the cache is out of the collector's way
    client = app.test_client()
    counts = {kind.value: cache.count(kind) for kind in ResourceKind}
    rows: dict[str, Any] = {"overview() alone": timed(
        lambda: overview(cache, prometheus_configured=False, local_node_id=None), args.runs)}
    for path in PATHS:
        rows[f"GET {path}"] = {**timed(request(client, path), args.runs), "bytes": request(client, path)()}
    result = {"tasks": args.tasks, "counts": counts, "rows": rows}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"synthetic cluster: {counts}")
    print("| measurement | p50 ms | p99 ms | max ms | runs | body bytes |\n|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['p50_ms']} | {row['p99_ms']} | {row['max_ms']} | {row['runs']} | "
              f"{row.get('bytes', '')} |")


if __name__ == "__main__":
    main()
