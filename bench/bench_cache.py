"""Cache write costs on the synthetic cluster (100 nodes, 1000 services, 10k tasks by default): what one
task poll, one per-service listing and one full sync cost the hub inside ``app.cache``.

    .venv/bin/python bench/bench_cache.py [--tasks 10000] [--runs 50]

Each sample applies a fresh copy of the listing (as the engine client hands over freshly decoded JSON);
making the copy (and, for the "prepared" rows, ``prepare_listing``, which the watcher can run in a thread)
is not timed, and a full garbage collection runs before each sample. Reports min, median, p99 and max in
milliseconds (on a shared machine the min is the closest to the uncontended cost). Runs against the
current tree or, for a before/after comparison, any older tree whose cache only has ``replace_kind``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cache.store import Cache
from app.resources import ResourceKind
from bench.synthetic import ClusterShape, build_snapshot
from bench.timing import percentile

Raw = dict[str, Any]


def timed(runs: int, prepare: Callable[[], Any], action: Callable[[Any], object]) -> list[float]:
    samples = []
    for _ in range(runs):
        argument = prepare()
        gc.collect()  # a full collection triggered by the preparation must not land in the sample
        started = time.perf_counter()
        action(argument)
        samples.append(time.perf_counter() - started)
    return samples


def report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    print(f"{name:48} min {ordered[0] * 1000:7.2f}  median {ordered[len(ordered) // 2] * 1000:7.2f}"
          f"  p99 {percentile(samples, 99) * 1000:7.2f}  max {ordered[-1] * 1000:7.2f} ms  ({len(samples)} runs)")


def apply_tasks(cache: Cache, raws: list[Raw], service_id: str | None = None) -> object:
    if hasattr(cache, "apply_listing"):
        return cache.apply_listing(ResourceKind.TASK, raws, cache.write_token(), service_id)
    return cache.replace_kind(ResourceKind.TASK, raws)  # type: ignore[attr-defined]


def sync(cache: Cache, snapshot: dict[ResourceKind, list[Raw]]) -> object:
    if hasattr(cache, "write_token"):
        return cache.replace_all(snapshot, cache.write_token())
    return cache.replace_all(snapshot)


_BUMPS = [0]


def bump_states(raws: list[Raw], every: int) -> list[Raw]:
    """Every ``every``-th task moves to a version newer than any before, with another state (a poll that
    sees changes: each call bumps further, so every sample really changes 1% of the tasks)."""
    _BUMPS[0] += 1_000_000
    for index in range(0, len(raws), every):
        raw = raws[index]
        raw["Version"] = {"Index": raw["Version"]["Index"] + _BUMPS[0]}
        raw["Status"] = {**raw["Status"], "State": "failed" if raw["Status"]["State"] == "running" else "running"}
    return raws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    runs = max(3, min(args.runs, 1000))
    snapshot = build_snapshot(ClusterShape(tasks=args.tasks))
    wire = {kind: json.dumps(raws) for kind, raws in snapshot.items()}
    fresh = {kind: (lambda text=text: json.loads(text)) for kind, text in wire.items()}
    cache = Cache()
    sync(cache, {kind: load() for kind, load in fresh.items()})
    tasks = ResourceKind.TASK

    report(f"task poll, {args.tasks} tasks, nothing changed",
           timed(runs, fresh[tasks], lambda r: apply_tasks(cache, r)))
    report(f"task poll, {args.tasks} tasks, 1% changed",
           timed(runs, lambda: bump_states(fresh[tasks](), 100), lambda r: apply_tasks(cache, r)))
    if hasattr(cache, "apply_listing"):
        from app.cache.listings import prepare_listing
        cache = Cache()
        sync(cache, {kind: load() for kind, load in fresh.items()})
        report("task poll prepared off the hub, nothing changed",
               timed(runs, lambda: prepare_listing(tasks, fresh[tasks]()), lambda r: apply_tasks(cache, r)))
        report("task poll prepared off the hub, 1% changed",
               timed(runs, lambda: prepare_listing(tasks, bump_states(fresh[tasks](), 100)),
                     lambda r: apply_tasks(cache, r)))
        started = time.perf_counter()
        prepare_listing(tasks, fresh[tasks]())
        print(f"prepare_listing (off the hub): {(time.perf_counter() - started) * 1000:.2f} ms")
        cache = Cache()
        sync(cache, {kind: load() for kind, load in fresh.items()})
        service_id = snapshot[ResourceKind.SERVICE][0]["ID"]
        own = [raw for raw in snapshot[tasks] if raw["ServiceID"] == service_id]
        report(f"one service's tasks ({len(own)}), nothing changed",
               timed(runs, lambda: copy.deepcopy(own), lambda r: apply_tasks(cache, r, service_id)))
    cache = Cache()
    sync(cache, {kind: load() for kind, load in fresh.items()})
    report("full resync, nothing changed",
           timed(max(3, runs // 5), lambda: {k: load() for k, load in fresh.items()}, lambda s: sync(cache, s)))
    report("initial full sync (empty cache)",
           timed(max(3, runs // 10), lambda: (Cache(), {k: load() for k, load in fresh.items()}),
                 lambda pair: sync(*pair)))
    if hasattr(cache, "apply_listing"):
        from app.cache.entries import estimate_size
        raws = fresh[tasks]()
        started = time.perf_counter()
        for raw in raws:
            estimate_size(raw)
        print(f"estimate_size per task: {(time.perf_counter() - started) / len(raws) * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
