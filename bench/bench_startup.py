"""Start-up: spawn to ready, import time and the fresh worker's memory, against a lab engine.

    SHOAL_LAB_DIR=/tmp/shoal-lab-startlab scripts/lab-swarm up --name startlab    # prints DOCKER_HOST=...
    .venv/bin/python bench/bench_startup.py --host unix:///.../docker.sock [--runs 5] [--settle 10]

Each run spawns ``gunicorn -c gunicorn.conf.py wsgi:app`` (one gevent worker, ``SERVICE_DATA_DIR=:memory:``,
a free port on 127.0.0.1) and polls ``/-/health`` and ``/-/ready`` every 10 ms on fresh connections:
spawn→health is the master plus the worker's import and ``Runtime.start``; spawn→ready adds the first full
sync. Then the worker's and the master's RSS at ready and, ``--settle`` seconds later, the worker's again.
Separately, ``import wsgi`` is timed in a fresh interpreter per run (the worker's import without gunicorn).
A first run is not counted (it fills the page cache and, with ``--pyc``, writes the bytecode caches:
``--pyc`` lets the children write ``__pycache__`` as a deployed service would, where the environment says
``PYTHONDONTWRITEBYTECODE``). Figures: median and max over the runs. Only 127.0.0.1 and the lab's socket
are contacted; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.localhttp import free_port, fresh_get
from bench.processes import stop

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(REPO / ".venv" / "bin" / "python")
GUNICORN = str(REPO / ".venv" / "bin" / "gunicorn")
POLL = 0.01
TIMEOUT = 60.0
IMPORT_PROBE = ("import time; t = time.perf_counter(); import wsgi; "
                "print(time.perf_counter() - t)")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker_of(master: int, deadline: float) -> int:
    """The one gunicorn worker's pid (it is forked a moment after the master starts)."""
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if len(children) == 1:
            return int(children[0])
        time.sleep(POLL)
    raise SystemExit("no gunicorn worker appeared")


def environment(host: str, port: int, *, pyc: bool = False) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SERVICE_DOCKER_HOST": host, "SERVICE_DATA_DIR": ":memory:",
           "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}", "SERVICE_LOG_LEVEL": "warning"}
    env.pop("SERVICE_CONFIG", None)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def status_of(port: int, path: str) -> int:
    with contextlib.suppress(OSError):
        return fresh_get(port, path, timeout=2)[0]
    return 0


def one_run(host: str, settle: float, log: Path, *, pyc: bool) -> dict[str, float]:
    port = free_port()
    with log.open("w") as out:
        started = time.monotonic()
        proc = subprocess.Popen([GUNICORN, "-c", "gunicorn.conf.py", "wsgi:app"], cwd=REPO,
                                env=environment(host, port, pyc=pyc), stdout=out, stderr=subprocess.STDOUT)
    deadline = started + TIMEOUT
    health = ready = None
    try:
        while ready is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not become ready:\n{log.read_text()[-3000:]}")
            if health is None and status_of(port, "/-/health") == 200:
                health = time.monotonic() - started
            if health is not None and status_of(port, "/-/ready") == 200:
                ready = time.monotonic() - started
            else:
                time.sleep(POLL)
        worker = worker_of(proc.pid, deadline)
        figures = {"spawn_to_health_s": health or ready, "spawn_to_ready_s": ready,
                   "worker_rss_ready_mib": rss_mib(worker), "master_rss_mib": rss_mib(proc.pid)}
        time.sleep(settle)
        figures["worker_rss_settled_mib"] = rss_mib(worker)
        return figures
    finally:
        stop(proc)


def import_seconds(host: str, *, pyc: bool) -> float:
    out = subprocess.run([PYTHON, "-c", IMPORT_PROBE], cwd=REPO, env=environment(host, free_port(), pyc=pyc),
                         capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
    return float(out.strip().splitlines()[-1])


def summary(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {key: {"median": round(statistics.median(r[key] for r in runs), 3),
                  "max": round(max(r[key] for r in runs), 3)} for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("DOCKER_HOST", ""), help="the lab engine (DOCKER_HOST)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after ready for the second RSS")
    parser.add_argument("--pyc", action="store_true", help="let the children write bytecode caches")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not args.host:
        raise SystemExit("--host (or DOCKER_HOST) names the lab engine")
    log = Path("/tmp") / f"bench_startup_{os.getpid()}.log"
    one_run(args.host, 0, log, pyc=args.pyc)   # not counted: page cache, bytecode caches
    runs: list[dict[str, Any]] = []
    for number in range(max(1, min(args.runs, 50))):
        run = one_run(args.host, args.settle, log, pyc=args.pyc)
        run["import_wsgi_s"] = import_seconds(args.host, pyc=args.pyc)
        runs.append(run)
        print(f"run {number + 1}: " + ", ".join(f"{k}={v:.3f}" for k, v in run.items()), flush=True)
    figures = summary(runs)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": figures}, indent=1) + "\n")
    log.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
