"""/search and the recommendation engine on the synthetic cluster (10,000 tasks by default).

    .venv/bin/python bench/bench_search.py [--tasks 10000] [--runs 200] [--quick]

Prints, per query, p50/p99/max of ``SearchIndex.search`` (the work of one request, inside the worker) and of
the whole in-process ``GET /search`` (parsing, JSON-LD, serialisation, headers), plus µs per cached object;
then the recommendation engine: a full evaluation (first sync) and one after a single task change, with the
longest time it held the hub between two yields. Results go to ``bench/results/search.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

from app.heap import settle
from app.query.search import SearchQuery
from app.recommendations.engine import EngineSettings, RecommendationEngine
from app.resources import ResourceKind
from app.runtime import runtime_of
from bench.bench_api import loaded_app
from bench.synthetic import ClusterShape, build_snapshot
from bench.timing import percentile

RESULTS = Path(__file__).resolve().parent / "results" / "search.json"
# From no match to matching nearly everything: the cost grows with the matches, not with the cluster.
QUERIES = ("zzzz", "node-01", "a1", "nginx", "web", "api", "registry.example.com", "e")
TARGET_US_PER_OBJECT = 1.0    # "sub-millisecond per thousand objects"


def timed(operation: Any, runs: int) -> list[float]:
    for _ in range(3):
        operation()
    samples = []
    deadline = time.monotonic() + 30
    for _ in range(runs):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
        if time.monotonic() > deadline:
            break
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(samples, 50) * 1000, "p99_ms": percentile(samples, 99) * 1000,
            "max_ms": max(samples) * 1000, "runs": len(samples)}


def bench_search(app: Any, objects: int, runs: int) -> list[dict[str, Any]]:
    runtime, client = runtime_of(app), app.test_client()
    rows = []
    print(f"\n/search on {objects} cached objects (p50 / p99 / max, ms; µs per object at p50)")
    print(f"{'query':24} {'matches':>8} {'search() p50':>12} {'p99':>7} {'max':>7} {'µs/obj':>7}   "
          f"{'GET p50':>8} {'p99':>7} {'max':>7}")
    for text in QUERIES:
        query = SearchQuery(text.lower(), 3, text)
        matches = sum(result.count for result in runtime.search.search(query))
        direct = summary(timed(lambda q=query: runtime.search.search(q), runs))
        path = f"/search?q={quote(text)}"
        assert client.get(path).status_code == 200
        http = summary(timed(lambda p=path: client.get(p), runs))
        per_object = direct["p50_ms"] * 1000 / objects
        rows.append({"query": text, "matches": matches, "search": direct, "http": http,
                     "us_per_object": per_object})
        print(f"{text:24} {matches:>8} {direct['p50_ms']:>12.2f} {direct['p99_ms']:>7.2f} {direct['max_ms']:>7.2f} "
              f"{per_object:>7.3f}   {http['p50_ms']:>8.2f} {http['p99_ms']:>7.2f} {http['max_ms']:>7.2f}")
    return rows


def bench_engine(app: Any) -> dict[str, Any]:
    cache = runtime_of(app).cache
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01))
    engine._mark_everything()
    started = time.perf_counter()
    engine.evaluate_now()
    full = {"wall_ms": (time.perf_counter() - started) * 1000, "max_slice_ms": engine.stats.max_slice_ms,
            "subjects": engine.stats.subjects, "findings": len(engine.findings())}
    engine.stats.max_slice_ms = 0.0
    task = dict(cache.entries(ResourceKind.TASK)[0].raw)
    task["Version"] = {"Index": (task.get("Version") or {}).get("Index", 0) + 1000}
    changes = cache.upsert(ResourceKind.TASK, task)
    engine._on_changes(changes)
    before = engine.stats.subjects
    started = time.perf_counter()
    engine.evaluate_now()
    one = {"wall_ms": (time.perf_counter() - started) * 1000, "subjects": engine.stats.subjects - before}
    print(f"\nrecommendations: full evaluation {full['wall_ms']:.1f} ms over {full['subjects']} subjects "
          f"({full['findings']} findings), longest hold of the hub {full['max_slice_ms']:.1f} ms; "
          f"after one task change {one['wall_ms']:.2f} ms ({one['subjects']} subjects)")
    return {"full": full, "one_task_change": one}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="30 runs per figure")
    args = parser.parse_args(argv)
    snapshot = build_snapshot(ClusterShape(tasks=args.tasks))
    objects = sum(len(raws) for raws in snapshot.values())
    app = loaded_app(snapshot)
    settle()   # as the watcher does after a full sync: full GC passes no longer walk the cache
    objects += runtime_of(app).cache.count(ResourceKind.STACK)
    rows = bench_search(app, objects, 30 if args.quick else args.runs)
    engine = bench_engine(app)
    worst = max(row["us_per_object"] for row in rows)
    print(f"\nworst query: {worst:.3f} µs per object at p50 (target ≤ {TARGET_US_PER_OBJECT:.1f})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"tasks": args.tasks, "objects": objects, "search": rows,
                                   "recommendations": engine, "worst_us_per_object": worst}, indent=2))
    print(f"saved {RESULTS}")


if __name__ == "__main__":
    main()
