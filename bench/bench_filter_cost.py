"""What a filter may cost the one gevent worker (docs/filter-cost.md), in three parts:

    .venv/bin/python bench/bench_filter_cost.py [--tasks 50000] [--runs 15] [--http-seconds 12]

a. In process, over ``--tasks`` synthetic tasks through ``app.query.listing.run`` (the list pipeline with
   its budget): p50/p99/max ms of each filter, whether it was accepted (200) or refused (FLT006), and the
   worst accepted one. Also the compile time of the heaviest 512-character constant-pattern filters with
   cold caches (RE2 programs near the 512 KiB budget).
b. Over HTTP, gunicorn with the production settings and a synthetic cache (``bench/gunicorn_synthetic.py``):
   pathological filters sent one after another (new salt each time, so no cache helps) while a second
   thread probes ``/-/health`` on a fresh connection every 10 ms: health p50/p99/max and the outcome of
   each pathological request.
c. The worker's RSS after startup and after 33 distinct heavy filters (on the previous main: 62 → 726 MB).

Every loop is bounded in count and time; only 127.0.0.1 is used. JSON goes to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

from app.cache.store import Cache
from app.errors import ProblemError
from app.query import listing, regex_cache
from app.query.filter import build_filter, clear_filter_cache
from app.resources import ResourceKind
from bench.localhttp import free_port, fresh_get
from bench.synthetic import ClusterShape, build_snapshot

K = ResourceKind
REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def percentile(samples: Sequence[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def summary(seconds: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile(seconds, 50) * 1000, "p99_ms": percentile(seconds, 99) * 1000,
            "max_ms": max(seconds) * 1000, "n": len(seconds)}


# ------------------------------------------------------------------------------------------ the filters
def accepted_candidates() -> list[str]:
    """Ordinary filters and the heaviest kinds that still fit the budget at 50,000 tasks."""
    return [
        'state == "running" && slot > 1',
        'state not in ["shutdown", "complete"] && exit_code != 0 || error.contains("exit")',
        'image.matches("^registry\\\\.example\\\\.com/shop/(api|web):") && slot % 2 == 0',
        'image.matches("\\\\pL{19}") || image.matches("[\\\\pL\\\\pN]{20}")',    # heavy, memoised per image
        'id.matches("^[a-m][0-9]")',                                          # one search per distinct id
        'size(error + service + node + image) > 40 && string(slot) + state != "x"',
        " || ".join(f'image.contains("{word}")' for word in ("alpha", "beta", "gamma", "delta", "omega",
                                                             "kappa", "sigma", "theta", "zeta", "iota")),
    ]


def pathological(salt: str) -> dict[str, str]:
    """At most 512 characters each; ``salt`` keeps every cache cold."""
    filters = {
        "issue: dynamic \\pL{400}": ('id.matches(id + "\\\\pL{400}") || image.matches(image + "\\\\pL{400}") || '
                                     f'error.matches(node + "\\\\pL{{400}}{salt}")'),
        "dynamic \\pL{19} x10": " || ".join(f'id.matches(id + "\\\\pL{{19}}{salt}{i}")' for i in range(10)),
        "constant \\pL{400} x14": " || ".join(f'id.matches("\\\\pL{{400}}{salt}{i}")' for i in range(14)),
        "constant \\pL{19} x14": " || ".join(f'id.matches("\\\\pL{{19}}{salt}{i:x}")' for i in range(14)),
        "searches \\pL{20} x12": " || ".join(f'id.matches("\\\\pL{{20}}{salt}{i:x}")' for i in range(12)),
    }
    assert all(len(expression) <= 512 for expression in filters.values())
    return filters


def heavy_constant_filters(salt: str) -> list[str]:
    """The most RE2 program a 512-character filter can ask for and still be accepted."""
    shapes = ["\\\\pL{25}", "\\\\pL{22}", "[\\\\pL\\\\pN]{20}", "(\\\\pL|\\\\pN){20}"]
    out = []
    for shape in shapes:
        parts: list[str] = []
        index = 0
        while True:
            candidate = " || ".join([*parts, f'id.matches("{shape}{salt}{index:x}")'])
            if len(candidate) > 512:
                break
            parts.append(f'id.matches("{shape}{salt}{index:x}")')
            index += 1
        out.append(" || ".join(parts))
    return out


# ------------------------------------------------------------------------------------------ a. in process
def in_process(tasks: int, runs: int) -> dict[str, Any]:
    started = time.perf_counter()
    cache = Cache()
    cache.replace_all(build_snapshot(ClusterShape(tasks=tasks)))
    print(f"built {cache.count(K.TASK)} tasks in {time.perf_counter() - started:.1f} s")

    def once(expression: str) -> tuple[float, str]:
        query = listing.parse_list_query(K.TASK, {"filter": expression}, None)
        begin = time.perf_counter()
        try:
            listing.run(cache, K.TASK, query)
            outcome = "200"
        except ProblemError as exc:
            outcome = exc.code
        return time.perf_counter() - begin, outcome

    rows: list[dict[str, Any]] = []
    print(f"\n{'filter (in process, ' + str(tasks) + ' tasks)':90} {'outcome':>8} {'p50':>8} {'p99':>8} {'max':>8}")
    candidates = [*accepted_candidates(), *pathological("a").values()]
    for expression in candidates:
        clear_filter_cache()
        regex_cache.CACHE.clear()
        samples: list[float] = []
        outcomes: set[str] = set()
        deadline = time.monotonic() + 20
        for _ in range(runs):
            seconds, outcome = once(expression)
            samples.append(seconds)
            outcomes.add(outcome)
            if time.monotonic() > deadline:
                break
        row = {"filter": expression, "outcomes": sorted(outcomes), **summary(samples)}
        rows.append(row)
        print(f"{expression[:90]:90} {'/'.join(sorted(outcomes)):>8} {row['p50_ms']:8.1f} {row['p99_ms']:8.1f} "
              f"{row['max_ms']:8.1f}")
    accepted = [row for row in rows if row["outcomes"] == ["200"]]
    worst = max(accepted, key=lambda row: row["max_ms"])
    print(f"worst accepted filter: p50 {worst['p50_ms']:.1f} / p99 {worst['p99_ms']:.1f} / max "
          f"{worst['max_ms']:.1f} ms: {worst['filter'][:80]}")

    compile_rows = []
    print(f"\n{'heaviest 512-char constant-pattern filters, cold caches, no budget':90} {'compile ms':>10}")
    for expression in heavy_constant_filters("c"):
        regex_cache.CACHE.clear()
        begin = time.perf_counter()
        try:
            build_filter(expression, K.TASK)
            outcome = "built"
        except ProblemError as exc:
            outcome = exc.code
        seconds = time.perf_counter() - begin
        compile_rows.append({"filter": expression, "compile_ms": seconds * 1000, "outcome": outcome,
                             "patterns": expression.count("matches(")})
        print(f"{expression[:80]:80} ({expression.count('matches(')} pat) {seconds * 1000:10.1f} {outcome}")
    return {"tasks": tasks, "filters": rows, "worst_accepted": worst, "heavy_compile": compile_rows}


# ------------------------------------------------------------------------------------------ b, c. HTTP
def start_server(tasks: int, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "BENCH_TASKS": str(tasks), "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", "PYTHONPATH": str(REPO)}
    env.pop("SERVICE_CONFIG", None)
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "bench/gunicorn_synthetic.py", "wsgi:app"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if fresh_get(port, "/-/health", timeout=2)[0] == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("gunicorn did not become healthy within 90 s")


def worker_rss(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    for line in Path(f"/proc/{children[0]}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def http_part(tasks: int, seconds: float) -> dict[str, Any]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    proc, port = start_server(tasks, RESULTS / "bench_filter_cost.gunicorn.log")
    try:
        fresh_get(port, "/tasks?limit=1")
        rss_start = worker_rss(proc.pid)
        probes: list[float] = []
        stop = threading.Event()

        def prober() -> None:
            while not stop.is_set() and len(probes) < 5000:
                begin = time.perf_counter()
                status, _ = fresh_get(port, "/-/health")
                probes.append(time.perf_counter() - begin)
                assert status == 200
                stop.wait(0.01)

        thread = threading.Thread(target=prober, daemon=True)
        thread.start()
        outcomes: dict[str, list[tuple[int, str | None, float]]] = {}
        deadline = time.monotonic() + seconds
        round_ = 0
        while time.monotonic() < deadline and round_ < 200:
            salt = f"{random.randrange(16**5):05x}{round_}"
            for name, expression in pathological(salt).items():
                begin = time.perf_counter()
                status, body = fresh_get(port, "/tasks?limit=5&filter=" + quote(expression))
                code = json.loads(body).get("code") if status == 400 else None
                outcomes.setdefault(name, []).append((status, code, time.perf_counter() - begin))
            round_ += 1
        stop.set()
        thread.join(timeout=20)
        health = summary(probes)
        print(f"\n/-/health on fresh connections during {round_} rounds of pathological filters "
              f"({tasks} tasks, HTTP): p50 {health['p50_ms']:.1f} / p99 {health['p99_ms']:.1f} / max "
              f"{health['max_ms']:.1f} ms over {health['n']} probes")
        pathological_rows = {}
        for name, results in outcomes.items():
            kinds = sorted({f"{status}{'/' + code if code else ''}" for status, code, _ in results})
            latency = summary([elapsed for *_, elapsed in results])
            pathological_rows[name] = {"outcomes": kinds, **latency}
            print(f"  {name:28} {','.join(kinds):>12}  p50 {latency['p50_ms']:7.1f}  max {latency['max_ms']:7.1f} ms")

        # c. 33 distinct heavy filters (the kind that once stalled it, now refused, and the heaviest accepted kind).
        distinct: list[str] = []
        for index in range(33):
            distinct.append(" || ".join(f'id.matches("\\\\pL{{400}}m{index}x{i}")' for i in range(14)))
            distinct.append(" || ".join(f'image.matches("\\\\pL{{19}}m{index}x{i}")' for i in range(14)))
        codes: dict[str, int] = {}
        for expression in distinct:
            status, body = fresh_get(port, "/tasks?limit=5&filter=" + quote(expression))
            key = str(status) + ("/" + json.loads(body).get("code", "") if status == 400 else "")
            codes[key] = codes.get(key, 0) + 1
        rss_after = worker_rss(proc.pid)
        print(f"\nworker RSS: {rss_start / 2**20:.0f} MiB after start, {rss_after / 2**20:.0f} MiB after "
              f"{len(distinct)} distinct heavy filters ({codes})")
        return {"health": health, "pathological": pathological_rows, "rounds": round_,
                "rss_start_mib": rss_start / 2**20, "rss_after_heavy_mib": rss_after / 2**20,
                "heavy_filter_outcomes": codes}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per filter in process")
    parser.add_argument("--http-seconds", type=float, default=12.0)
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("celpy").setLevel(logging.CRITICAL)
    report: dict[str, Any] = {"in_process": in_process(args.tasks, args.runs)}
    if not args.skip_http:
        report["http"] = http_part(args.tasks, args.http_seconds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"filter_cost_{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\nsaved {out.relative_to(REPO)}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
