"""Reads computed (the response memo cleared before each) against reads served from the memo, in-process
(Flask test client) on a synthetic cluster: what a read costs right after a change, and between changes.

    .venv/bin/python bench/bench_computed_reads.py [--tasks 10000]

Results: ``bench/results/computed_reads.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent.monkey

gevent.monkey.patch_all()

from bench.bench_api import loaded_app  # noqa: E402
from bench.synthetic import ClusterShape, build_snapshot  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "computed_reads.json"
FILTERED = "/tasks?filter=state%20%3D%3D%20%22running%22%20%26%26%20slot%20%3E%201&sort=state&limit=50"


def timed(call: object, runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()   # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 3), "p99_ms": round(samples[int(0.99 * (len(samples) - 1))], 3),
            "max_ms": round(samples[-1], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    app = loaded_app(build_snapshot(ClusterShape(tasks=args.tasks)))
    memo, client = app.wsgi_app, app.test_client()
    service = client.get("/services?limit=1").get_json()["items"][0]["ID"]
    reads = {"service detail": f"/services/{service}", "/nodes": "/nodes", "/services": "/services",
             "/tasks?limit=50": "/tasks?limit=50", "/tasks?limit=200": "/tasks?limit=200",
             "filtered+sorted page": FILTERED}
    result: dict[str, object] = {"tasks": args.tasks, "runs": args.runs, "reads": {}}
    print(f"| read ({args.tasks:,} tasks, in-process) | computed p50 / p99 ms | memoised p50 / p99 ms | bytes |")
    print("|---|---|---|---|")
    for name, path in reads.items():
        for _ in range(20):
            memo.clear()
            assert client.get(path).status_code == 200
        computed = timed(lambda path=path: (memo.clear(), client.get(path)), args.runs)
        memoised = timed(lambda path=path: client.get(path), args.runs)
        size = len(client.get(path).get_data())
        result["reads"][name] = {"computed": computed, "memoised": memoised, "bytes": size}  # type: ignore[index]
        print(f"| {name} | {computed['p50_ms']} / {computed['p99_ms']} | {memoised['p50_ms']} / "
              f"{memoised['p99_ms']} | {size:,} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
