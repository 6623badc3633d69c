"""The state store (docs/state-store.md): write latency at a steady change rate, bulk write throughput, start-up
restore time, and how long the gevent hub is held while the store flushes.

Run (from the repository root; a few seconds with the defaults)::

    .venv/bin/python -m gevent.monkey --module bench.bench_store [--tasks 10000] [--rate 100] [--seconds 5]

Measured on the synthetic cluster (``bench/synthetic.py``) with a real file in a temporary directory:

- first flush: the first full sync's ~12,000 create records written as one transaction (bulk throughput),
  and the hub's longest stall meanwhile (a 1 ms ticker greenlet; the cache write itself is excluded);
- steady writes: ``--rate`` task updates per second for ``--seconds``: per change, the time from the cache
  recording it to its transaction committing (batch interval 0.5 s included), and the hub's longest stall;
- restore: a new cache and store opened on the file (lock, checks, load on the store thread, then
  ``Cache.restore`` and a heap settle on the hub), and the hub's longest stall during the load;
- archive pages (``--archive``, default 100,000): that many task-update records written to the file beyond
  the ring, the service restarted on it (only the ring loaded), then ``/history`` pages as the endpoint
  selects and builds them (``app.history.archive.select_all`` + ``entries.entry``): the newest page (ring),
  pages at random cursors deep in the archive (limit 50 and 200), and a filtered page that matches nothing
  (the scan bound), with the hub's longest stall.

Prints p50/p99/max and writes JSON to ``bench/results/bench_store.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent

from app import heap
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.history import entries
from app.history.archive import select_all
from app.history.selection import Cursor, HistoryFilter
from app.resources import ResourceKind
from app.store.database import FILE_NAME, Database
from app.store.persister import Persister
from bench.synthetic import ClusterShape, build_snapshot
from bench.timing import percentile

RESULTS = Path(__file__).resolve().parent / "results"


class Ticker:
    """The longest gap between wake-ups of a greenlet that asks for 1 ms sleeps: how long the hub was held."""

    def __init__(self) -> None:
        self.max_gap = 0.0
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        last = time.perf_counter()
        while True:
            gevent.sleep(0.001)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - last)
            last = now

    def stop(self) -> float:
        self._greenlet.kill()
        return self.max_gap * 1000


def _commits() -> list[tuple[float, list[float]]]:
    """Wrap ``Database.write`` to note each commit's end time and its changes' record times."""
    noted: list[tuple[float, list[float]]] = []
    real = Database.write

    def write(self: Database, changes: list[Change], now: float | None = None) -> None:
        real(self, changes, now=now)
        noted.append((time.time(), [change.timestamp for change in changes]))

    Database.write = write  # type: ignore[method-assign,assignment]
    return noted


def _stats(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50": round(percentile(samples, 50), 2), "p99": round(percentile(samples, 99), 2),
            "max": round(max(samples), 2) if samples else 0.0}


def run(tasks: int, rate: float, seconds: float, archive: int = 0) -> dict[str, Any]:
    results: dict[str, Any] = {"tasks": tasks, "rate": rate, "seconds": seconds}
    commits = _commits()
    snapshot = build_snapshot(ClusterShape(tasks=tasks))
    with tempfile.TemporaryDirectory(prefix="bench-store-") as directory:
        path = os.path.join(directory, FILE_NAME)
        cache = Cache()
        store = Persister(cache, path)
        store.start()

        # First full sync: every object created at once, one bulk transaction.
        changes = cache.replace_all(copy.deepcopy(snapshot))
        heap.settle()            # as the watcher does after a full sync
        ticker = Ticker()
        deadline = time.monotonic() + 120
        while store.stats.flushes < 1 and time.monotonic() < deadline:
            gevent.sleep(0.01)
        results["first_flush"] = {"changes": len(changes), "ms": round(store.stats.last_flush_ms, 1),
                                  "changes_per_s": round(len(changes) / (store.stats.last_flush_ms / 1000)),
                                  "hub_max_stall_ms": round(ticker.stop(), 2)}
        commits.clear()
        store.stats.max_flush_ms = 0.0

        # Steady writes: task updates at ``rate`` per second.
        task_raws = [copy.deepcopy(raw) for raw in snapshot[ResourceKind.TASK][:1000]]
        ticker = Ticker()
        started = time.monotonic()
        count = int(rate * seconds)
        for number in range(count):
            raw = task_raws[number % len(task_raws)]
            raw = {**raw, "Version": {"Index": raw["Version"]["Index"] + 1 + number}}
            task_raws[number % len(task_raws)] = raw
            cache.apply_inspect(ResourceKind.TASK, raw["ID"], raw, cache.write_token())
            wait = started + (number + 1) / rate - time.monotonic()
            if wait > 0:
                gevent.sleep(wait)
        deadline = time.monotonic() + 10
        while sum(len(times) for _, times in commits) < count and time.monotonic() < deadline:
            gevent.sleep(0.01)
        steady_stall = ticker.stop()
        latencies = [(done - at) * 1000 for done, times in commits for at in times]
        flush_sizes = [len(times) for _, times in commits]
        results["steady"] = {"changes": count, "latency_ms": _stats(latencies), "flushes": len(commits),
                             "changes_per_flush_p50": percentile([float(s) for s in flush_sizes], 50),
                             "flush_ms_max": round(store.stats.max_flush_ms, 2),
                             "hub_max_stall_ms": round(steady_stall, 2)}
        last_seq = cache.history.last_seq
        store.stop()
        results["file_bytes"] = os.path.getsize(path)

        # Restore into a fresh cache.
        restored = Cache()
        again = Persister(restored, path)
        ticker = Ticker()
        began = time.perf_counter()
        again.start()
        total_ms = (time.perf_counter() - began) * 1000
        results["restore"] = {"objects": again.stats.restored_objects, "records": again.stats.restored_records,
                              "ms": round(total_ms, 1), "hub_max_stall_ms": round(ticker.stop(), 2)}
        assert restored.history.last_seq == last_seq
        assert restored.count(ResourceKind.TASK) == tasks
        again.stop()
        if archive:
            results["archive"] = _archive_pages(path, snapshot, archive)
    return results


def _archive_pages(path: str, snapshot: dict[ResourceKind, list[Any]], count: int) -> dict[str, Any]:
    """``count`` task updates appended to the file (before/after, as the watcher records them), then pages."""
    database = Database.open(path)
    raws = snapshot[ResourceKind.TASK][:500]
    first = int(database._db.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0]) + 1
    began = time.perf_counter()
    for start in range(first, first + count, 5_000):
        batch = []
        for seq in range(start, min(start + 5_000, first + count)):
            raw = raws[seq % len(raws)]
            after = {**raw, "Version": {"Index": seq}}
            batch.append(Change(seq, ResourceKind.TASK, Action.UPDATE, raw["ID"], raw["ID"], time.time(), raw, after,
                                3_000))
        database.write(batch)
    write_s = time.perf_counter() - began
    database.close()
    cache = Cache()
    store = Persister(cache, path)
    store.start()
    history = cache.history
    floor = history.oldest_seq or 0
    results: dict[str, Any] = {"archived": count, "write_s": round(write_s, 1), "file_bytes": os.path.getsize(path),
                               "ring": len(history)}
    rng = random.Random(7)

    selecting: list[float] = []

    def page(wanted: HistoryFilter, before: int | None, limit: int) -> float:
        started = time.perf_counter()
        chosen = select_all(history, store, wanted, Cursor(before, limit))
        selecting.append((time.perf_counter() - started) * 1000)
        for change in chosen.changes:
            entries.entry(change, cache, "")
        assert chosen.changes or wanted.object_id is not None
        return (time.perf_counter() - started) * 1000

    ticker = Ticker()
    results["ring_page_50_ms"] = _stats([page(HistoryFilter(), None, 50) for _ in range(50)])
    for limit in (50, 200):
        selecting.clear()
        samples = [page(HistoryFilter(), rng.randrange(first + 1_000, floor), limit) for _ in range(100)]
        results[f"archive_page_{limit}_ms"] = _stats(samples)
        results[f"archive_select_{limit}_ms"] = _stats(list(selecting))
    selecting.clear()
    results["archive_page_50_default_actions_ms"] = _stats(
        [page(HistoryFilter(action=frozenset({Action.CREATE, Action.UPDATE, Action.REMOVE})),
              rng.randrange(first + 1_000, floor), 50) for _ in range(100)])
    results["archive_select_50_default_actions_ms"] = _stats(list(selecting))
    results["archive_filtered_nothing_ms"] = _stats(
        [page(HistoryFilter(object_id="nobody"), rng.randrange(first + 10_000, floor), 50) for _ in range(20)])
    results["hub_max_stall_ms"] = round(ticker.stop(), 2)
    store.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--archive", type=int, default=100_000, help="records archived for the page bench")
    args = parser.parse_args()
    results = run(args.tasks, args.rate, args.seconds, args.archive)
    first, steady, restore = results["first_flush"], results["steady"], results["restore"]
    print(f"first flush: {first['changes']} changes in {first['ms']} ms ({first['changes_per_s']}/s), "
          f"hub max stall {first['hub_max_stall_ms']} ms")
    latency = steady["latency_ms"]
    print(f"steady {args.rate:g} changes/s for {args.seconds:g} s: change → committed p50 {latency['p50']} ms, "
          f"p99 {latency['p99']} ms, max {latency['max']} ms; {steady['flushes']} flushes, "
          f"max flush {steady['flush_ms_max']} ms; hub max stall {steady['hub_max_stall_ms']} ms")
    print(f"restore: {restore['objects']} objects + {restore['records']} records in {restore['ms']} ms, "
          f"hub max stall {restore['hub_max_stall_ms']} ms; file {results['file_bytes'] / 1e6:.1f} MB")
    if "archive" in results:
        pages = results["archive"]
        print(f"archive: {pages['archived']} records written in {pages['write_s']} s, file "
              f"{pages['file_bytes'] / 1e6:.0f} MB, ring {pages['ring']}; page (select + entries) ms: "
              + "; ".join(f"{name[:-3]} p50 {pages[name]['p50']} p99 {pages[name]['p99']} max {pages[name]['max']}"
                          for name in ("ring_page_50_ms", "archive_page_50_ms", "archive_select_50_ms",
                                       "archive_page_200_ms", "archive_select_200_ms",
                                       "archive_select_50_default_actions_ms", "archive_filtered_nothing_ms"))
              + f"; hub max stall {pages['hub_max_stall_ms']} ms")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_store.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
