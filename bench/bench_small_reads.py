"""Small reads against their floors, in one run: wrk (keep-alive, C) through gunicorn on the lab engine.

    .venv/bin/python bench/bench_small_reads.py [--tasks 10000] [--rounds 3] [--seconds 3] [--profile]

Three servers under the same gunicorn gevent worker: Shoal on the lab engine (``gunicorn.conf.py``), a
bare WSGI callable and a one-route Flask app (``bench/floors.py``) answering a pre-encoded body the size of
a service detail. Each round runs every probe once, servers alternated, so all saw the same noise; a
figure is the median over the rounds. Single client (``wrk -c1``) for p50/p99/max per read, then 50
keep-alive clients on a detail (req/s, p99) while a fresh connection asks ``/-/health`` (p99), then
start to ready, the worker's RSS and its idle CPU. ``--tasks N`` first scales a service whose placement
matches no node to N replicas: real pending tasks without containers. ``--profile`` records the worker
with py-spy under 50 clients on a detail and on ``/tasks?limit=50`` and prints where the time goes, hook
by hook (``bench/hook_profile.py``). Results: ``bench/results/small_reads[_<tasks>].json``.
Only 127.0.0.1 and the lab's unix socket are contacted; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker
import requests

from bench.bench_engine_scale import BIG, cpu_seconds, create_big, lab_up, remove_service, rss_bytes, worker_pid
from bench.localhttp import free_port, fresh_get
from bench.processes import stop

REPO = Path(__file__).resolve().parent.parent
GUNICORN = str(REPO / ".venv" / "bin" / "gunicorn")
RESULTS = REPO / "bench" / "results"
WRK_SCRIPT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, ' ..
    '"p90_us": %d, "p99_us": %d, "max_us": %d}\\n', summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max))
end
"""


# ------------------------------------------------------------------------------------------- servers
@contextlib.contextmanager
def server(argv: list[str], env: dict[str, str], ready_path: str, log: Path,
           timeout: float = 180) -> Iterator[tuple[str, int, float]]:
    """A gunicorn started with ``argv``; yields (base URL, master pid, seconds from spawn to ready)."""
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(REPO), "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}", **env}
    environment.pop("SERVICE_CONFIG", None)
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        started = time.monotonic()
        proc = subprocess.Popen([GUNICORN, *argv], cwd=REPO, env=environment, stdout=out, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None or time.monotonic() - started > timeout:
                raise SystemExit(f"{argv} did not become ready:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                if fresh_get(port, ready_path, timeout=2)[0] == 200:
                    break
            time.sleep(0.01)
        yield base, proc.pid, time.monotonic() - started
    finally:
        stop(proc)


def shoal_env(host: str) -> dict[str, str]:
    return {"SERVICE_DOCKER_HOST": host, "SERVICE_LOG_LEVEL": "info", "SERVICE_DATA_DIR": ":memory:"}


# ----------------------------------------------------------------------------------------------- wrk
def wrk(url: str, *, clients: int, seconds: float, script: Path) -> dict[str, float]:
    threads = 1 if clients == 1 else 2
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
                          "-H", "Accept: application/json", "-s", str(script), url],
                         capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK "))
    raw = json.loads(line[4:])
    if raw["errors"]:
        raise SystemExit(f"wrk saw {raw['errors']} errors on {url}:\n{out}")
    return {"rps": raw["requests"] / (raw["duration_us"] / 1e6), "p50_ms": raw["p50_us"] / 1000,
            "p90_ms": raw["p90_us"] / 1000, "p99_ms": raw["p99_us"] / 1000, "max_ms": raw["max_us"] / 1000}


def fresh_health(port: int, stop: threading.Event, samples: list[float]) -> None:
    """``/-/health`` on a new connection every 50 ms until ``stop`` (bounded by the caller's wrk run)."""
    while not stop.is_set() and len(samples) < 10_000:
        started = time.perf_counter()
        status, _ = fresh_get(port, "/-/health")
        if status == 200:
            samples.append((time.perf_counter() - started) * 1000)
        stop.wait(0.05)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


# --------------------------------------------------------------------------------------------- probes
def probe_paths(base: str) -> dict[str, str]:
    services = requests.get(f"{base}/services", headers={"Accept": "application/json"}, timeout=10).json()
    service = next(s for s in services["items"] if s["Spec"]["Name"].endswith("web")) \
        if any(s["Spec"]["Name"].endswith("web") for s in services["items"]) else services["items"][0]
    return {"detail": f"/services/{service['ID']}", "nodes": "/nodes", "health": "/-/health",
            "services": "/services", "tasks50": "/tasks?limit=50", "tasks200": "/tasks?limit=200"}


def idle_cpu_percent(pid: int, seconds: float) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds * 100


def measure(args: argparse.Namespace, host: str, work: Path) -> dict[str, Any]:
    script = work / "report.lua"
    script.write_text(WRK_SCRIPT)
    result: dict[str, Any] = {"tasks": args.tasks or None, "rounds": args.rounds, "seconds": args.seconds}
    with server(["-c", "gunicorn.conf.py", "wsgi:app"], shoal_env(host), "/-/ready", work / "shoal.log") \
            as (shoal, master, ready_s):
        pid = worker_pid(master)
        result["start_to_ready_s"] = round(ready_s, 2)
        time.sleep(3)
        result["worker_rss_mib"] = round(rss_bytes(pid) / 2**20, 1)
        result["master_rss_mib"] = round(rss_bytes(master) / 2**20, 1)
        paths = probe_paths(shoal)
        body = requests.get(shoal + paths["detail"], headers={"Accept": "application/json"}, timeout=10).content
        floor_env = {"BENCH_FLOOR_BODY": body.decode()}
        with server(["-c", "bench/gunicorn_floor.py", "bench.floors:bare"], floor_env, "/", work / "bare.log") \
                as (bare, _, _), \
                server(["-c", "bench/gunicorn_floor.py", "bench.floors:one_route"], floor_env, "/",
                       work / "flask.log") as (flask, _, _):
            single: dict[str, list[dict[str, float]]] = {}
            targets = {"bare WSGI": bare + "/", "one-route Flask": flask + "/",
                       **{name: shoal + path for name, path in paths.items()}}
            for url in targets.values():   # warm-up
                wrk(url, clients=1, seconds=1, script=script)
            for round_no in range(args.rounds):
                for name, url in targets.items():
                    single.setdefault(name, []).append(wrk(url, clients=1, seconds=args.seconds, script=script))
                print(f"round {round_no + 1}/{args.rounds} single-client done", file=sys.stderr, flush=True)
            result["single"] = {name: median_of(rounds) for name, rounds in single.items()}
            many: dict[str, list[dict[str, float]]] = {}
            health: list[float] = []
            for _round in range(args.rounds):
                for name, url in (("bare WSGI", bare + "/"), ("one-route Flask", flask + "/"),
                                  ("detail", shoal + paths["detail"])):
                    stop, samples = threading.Event(), []
                    prober = None
                    if name == "detail":
                        prober = threading.Thread(target=fresh_health,
                                                  args=(int(shoal.rsplit(":", 1)[1]), stop, samples))
                        prober.start()
                    many.setdefault(name, []).append(wrk(url, clients=50, seconds=args.seconds, script=script))
                    stop.set()
                    if prober:
                        prober.join()
                        health += samples
            result["clients50"] = {name: median_of(rounds) for name, rounds in many.items()}
            result["fresh_health_during_load"] = {"p50_ms": percentile(health, 50), "p99_ms": percentile(health, 99),
                                                  "max_ms": max(health), "n": len(health)}
        if args.profile:
            from bench.hook_profile import profile_worker
            result["profile"] = {name: profile_worker(pid, shoal + paths[name], seconds=args.seconds * 2,
                                                     work=work)
                                 for name in ("detail", "tasks50")}
        time.sleep(2)
        result["idle_cpu_percent"] = round(idle_cpu_percent(pid, args.idle_seconds), 3)
        result["worker_rss_idle_mib"] = round(rss_bytes(pid) / 2**20, 1)
    return result


def ratios(result: dict[str, Any]) -> dict[str, float]:
    single, floor = result["single"], result["single"]["one-route Flask"]["p50_ms"]
    out = {f"{name} p50 / one-route Flask p50": round(row["p50_ms"] / floor, 2)
           for name, row in single.items() if name not in ("bare WSGI", "one-route Flask")}
    out.update({f"{name} p99 / its p50": round(row["p99_ms"] / row["p50_ms"], 2) for name, row in single.items()})
    many = result["clients50"]
    out["50 clients detail rps / one-route Flask rps"] = round(
        many["detail"]["rps"] / many["one-route Flask"]["rps"], 2)
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Small reads, {result['tasks'] or 'lab'} tasks, median of {result['rounds']} rounds of "
             f"{result['seconds']} s (wrk, keep-alive)", "",
             "| read (1 client) | p50 ms | p90 ms | p99 ms | max ms | req/s |", "|---|---|---|---|---|---|"]
    for name, row in result["single"].items():
        lines.append(f"| {name} | {row['p50_ms']:.3f} | {row['p90_ms']:.3f} | {row['p99_ms']:.3f} | "
                     f"{row['max_ms']:.2f} | {row['rps']:.0f} |")
    lines += ["", "| 50 clients | req/s | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for name, row in result["clients50"].items():
        lines.append(f"| {name} | {row['rps']:.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['max_ms']:.1f} |")
    health = result["fresh_health_during_load"]
    lines += ["", f"fresh-connection /-/health during the 50-client detail load: p50 {health['p50_ms']:.2f} ms, "
              f"p99 {health['p99_ms']:.2f} ms, max {health['max_ms']:.1f} ms (n={health['n']})",
              f"start to ready {result['start_to_ready_s']} s; worker RSS {result['worker_rss_mib']} MiB "
              f"(idle {result['worker_rss_idle_mib']}), master {result['master_rss_mib']} MiB; "
              f"idle CPU {result['idle_cpu_percent']} % of a core", "", "Ratios:"]
    lines += [f"- {key}: {value}" for key, value in ratios(result).items()]
    for name, table in result.get("profile", {}).items():
        lines += ["", f"Where a {name} spends the worker's time (py-spy, 50 clients):", "", table["markdown"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=0, help="pending tasks to add first (0: the lab as it is)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: scripts/setup installs it (Debian package wrk)")
    host = lab_up()
    api = docker.APIClient(base_url=host, timeout=300)
    big = create_big(api, args.tasks) if args.tasks else None
    try:
        with tempfile.TemporaryDirectory(prefix="shoal-small-reads-") as tmp:
            result = measure(args, host, Path(tmp))
    finally:
        if big:
            remove_service(api, BIG)
    result["ratios"] = ratios(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"small_reads{'_' + str(args.tasks) if args.tasks else ''}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
