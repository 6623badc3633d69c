"""Archive pages of ``/history`` and its feed (docs/figures.md): page latency and how long the hub is held.

``--archive`` task-update records (before/after, as the watcher records them) are written to a state store
file beyond a small ring (``server.history_size``); the app starts on it (only the ring is loaded) against the
in-memory fake engine, then ``/history?limit=200&before=<random deep cursor>`` (JSON) and the same page as
Atom are served through the Flask test client on the hub, while a ticker greenlet asking for 1 ms sleeps
notes the longest gap between its wake-ups: the hub's longest hold during the page.

Run (from the repository root; about a minute with the defaults)::

    .venv/bin/python -m gevent.monkey --module bench.bench_history_archive [--archive 20000] [--pages 60] [--heavy]

Prints p50/p99/max of the page and the longest hub hold, and writes JSON to
``bench/results/bench_history_archive.json``. To compare with another checkout (the code before a change),
run this file from there with ``--repo`` pointing at it (its ``app`` is imported).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


class Ticker:
    """The longest gap between wake-ups of a greenlet that asks for 1 ms sleeps: the hub's longest hold. Two
    measures: wall-clock (what another request waits; on a loaded machine it includes the process being
    descheduled and waits for the GIL held by the store's thread), and the hub thread's CPU time between two
    wake-ups (``time.thread_time``: the work the hub did without letting go, whatever the machine's load)."""

    def __init__(self) -> None:
        import gevent

        self.max_gap = self.max_cpu = 0.0
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        import gevent

        while True:
            gevent.sleep(0.001)
            now, cpu = time.perf_counter(), time.thread_time()
            self.max_gap = max(self.max_gap, now - self._last)
            self.max_cpu = max(self.max_cpu, cpu - self._last_cpu)
            self._last, self._last_cpu = now, cpu

    def reset(self) -> None:
        self.max_gap = self.max_cpu = 0.0
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()

    def read_ms(self) -> tuple[float, float]:
        """(wall, cpu) of the longest hold since ``reset``, in ms."""
        import gevent

        gevent.sleep(0.002)    # let the ticker see the end of the last hold
        return self.max_gap * 1000, self.max_cpu * 1000

    def stop(self) -> None:
        self._greenlet.kill()


def _percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def _stats(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50": round(_percentile(samples, 50), 1), "p99": round(_percentile(samples, 99), 1),
            "max": round(max(samples), 1)}


def _fill(path: str, count: int, heavy: bool) -> int:
    """``count`` updates in a new store file; returns the last sequence number. Task updates (a version and a
    status message changed: light diffs, short entries), or with ``heavy`` service updates with 200
    environment variables and 100 labels changed (~1 ms of diff and ~7 KB of JSON per entry)."""
    from app.cache.history import Action, Change
    from app.resources import ResourceKind
    from app.store.database import Database
    from bench.synthetic import ClusterShape, build_snapshot

    snapshot = build_snapshot(ClusterShape(tasks=500))
    database = Database.open(path)
    now = time.time() - count
    kind = ResourceKind.SERVICE if heavy else ResourceKind.TASK
    raws = snapshot[kind][:500]
    for start in range(1, count + 1, 5_000):
        batch = []
        for seq in range(start, min(start + 5_000, count + 1)):
            raw = raws[seq % len(raws)]
            if heavy:
                raw, after = _heavy(raw)
            else:
                after = {**raw, "Version": {"Index": seq}, "Status": {**raw.get("Status", {}), "Message": f"m{seq}"}}
            batch.append(Change(seq, kind, Action.UPDATE, raw["ID"], raw["ID"], now + seq, raw, after, 3_000))
        database.write(batch)
    database.close()
    return count


def _heavy(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    before = copy.deepcopy(raw)
    container = before["Spec"]["TaskTemplate"].setdefault("ContainerSpec", {})
    container["Env"] = [f"VAR_{i}=value-{i}" for i in range(200)]
    before["Spec"]["Labels"] = {f"label.{i}": f"v{i}" for i in range(100)}
    after = copy.deepcopy(before)
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Env"] = [f"VAR_{i}=other-{i}" for i in range(200)]
    after["Spec"]["Labels"] = {f"label.{i}": f"w{i}" for i in range(100)}
    return before, after


def run(count: int, pages: int, ring: int, heavy: bool = False) -> dict[str, Any]:
    from app.store.database import FILE_NAME
    from tests.fakes import FakeEngine
    from tests.unit.objects import cluster
    from tests.unit.support import build_harness

    results: dict[str, Any] = {"archived": count, "ring": ring, "limit": 200,
                               "records": "heavy service updates" if heavy else "task updates"}
    with tempfile.TemporaryDirectory() as directory:
        last = _fill(str(Path(directory) / FILE_NAME), count, heavy)
        harness = build_harness(FakeEngine(cluster()), data_dir=directory, history_size=ring)
        harness.start(timeout=60)
        client = harness.app.test_client()
        rng = random.Random(7)
        ticker = Ticker()
        try:
            for name, suffix in (("json", ""), ("atom", ".atom")):
                client.get(f"/history{suffix}?limit=200&before={last - ring - 1_000}")   # warm-up, not counted
                took, held, worked = [], [], []
                for _ in range(pages):
                    before = rng.randrange(1_000, last - ring - 1_000)
                    ticker.reset()
                    started = time.perf_counter()
                    response = client.get(f"/history{suffix}?limit=200&before={before}")
                    took.append((time.perf_counter() - started) * 1000)
                    wall, cpu = ticker.read_ms()
                    held.append(wall)
                    worked.append(cpu)
                    assert response.status_code == 200, response.get_data(as_text=True)[:300]
                    if suffix == "":
                        assert len(response.get_json()["items"]) == 200
                results[name] = {"page_ms": _stats(took), "hub_hold_ms": _stats(held),
                                 "hub_hold_cpu_ms": _stats(worked)}
        finally:
            ticker.stop()
            harness.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=int, default=20_000, help="records in the file")
    parser.add_argument("--pages", type=int, default=60, help="pages per representation")
    parser.add_argument("--ring", type=int, default=500, help="server.history_size")
    parser.add_argument("--heavy", action="store_true", help="service updates with many changed fields")
    parser.add_argument("--repo", default=None, help="import app from this checkout instead")
    parser.add_argument("--out", default=str(RESULTS / "bench_history_archive.json"))
    args = parser.parse_args()
    if args.repo:
        sys.path.insert(0, args.repo)
    results = run(args.archive, args.pages, args.ring, args.heavy)
    for name in ("json", "atom"):
        page, held, cpu = (results[name][key] for key in ("page_ms", "hub_hold_ms", "hub_hold_cpu_ms"))
        print(f"{name}: 200-entry archive page p50 {page['p50']} p99 {page['p99']} max {page['max']} ms; "
              f"longest hub hold p50 {held['p50']} p99 {held['p99']} max {held['max']} ms "
              f"(hub CPU p50 {cpu['p50']} p99 {cpu['p99']} max {cpu['max']} ms)")
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
