"""Bytes the cache holds per task, measured in a fresh process and printed as one JSON line.

Run by ``bench/bench_api.py`` as ``python bench/memory_probe.py --tasks 50000 --method rss|tracemalloc``.
A fresh process is needed because RSS never shrinks reliably once a process has allocated.

What counts as "cached": the engine JSON as ``json.loads`` decodes it (that is what the watcher hands
to the cache, and the cache keeps those dicts as ``Entry.raw``) plus everything ``replace_all`` derives
and indexes. The baseline is a cache already holding every other kind, so the difference is the tasks
alone. The serialised JSON stays alive through both readings, so it cancels out.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

from app.cache.store import Cache
from app.config import Settings
from app.resources import ResourceKind
from bench.synthetic import ClusterShape, Snapshot, build_snapshot


def rss_bytes() -> int:
    """Resident set size from /proc (Linux); includes allocator slack, which is the honest number."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * resource.getpagesize()


def traced_bytes() -> int:
    """Live bytes allocated by Python objects (tracemalloc), without allocator slack."""
    return tracemalloc.get_traced_memory()[0]


def encoded(snapshot: Snapshot) -> dict[ResourceKind, bytes]:
    """The snapshot as the engine would send it, so decoding yields fresh, unshared objects."""
    return {kind: json.dumps(raws, separators=(",", ":")).encode() for kind, raws in snapshot.items()}


def probe(tasks: int, read: Callable[[], int]) -> dict[str, float]:
    wire = encoded(build_snapshot(ClusterShape(tasks=tasks)))
    gc.collect()
    cache = Cache(Settings().history_size)
    others: Snapshot = {kind: json.loads(text) for kind, text in wire.items() if kind is not ResourceKind.TASK}
    cache.replace_all(others)
    del others
    gc.collect()
    before = read()
    cache.replace_all({kind: json.loads(text) for kind, text in wire.items()})
    gc.collect()
    after = read()
    assert cache.count(ResourceKind.TASK) == tasks
    return {"tasks": tasks, "json_bytes_per_task": len(wire[ResourceKind.TASK]) / tasks,
            "bytes_before": before, "bytes_after": after, "bytes_per_task": (after - before) / tasks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--method", choices=("rss", "tracemalloc"), default="rss")
    args = parser.parse_args()
    if args.method == "tracemalloc":
        tracemalloc.start()
        result = probe(args.tasks, traced_bytes)
    else:
        result = probe(args.tasks, rss_bytes)
    print(json.dumps({"method": args.method, **result}))


if __name__ == "__main__":
    main()
