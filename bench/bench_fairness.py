"""Fairness of the one worker under load: does a fresh connection still get an answer while clients hammer it?

    .venv/bin/python bench/bench_fairness.py [--seconds 20] [--clients 200] [--tasks 10000]
                                              [--variant load|pathological|all] [--repo DIR] [--label NAME]

gunicorn runs with the production settings and a synthetic cache (``bench/gunicorn_synthetic.py``, no
engine, nothing changes during the run) on a free 127.0.0.1 port. Per variant, for ``--seconds``:

- ``load``: ``--clients`` keep-alive connections (one gevent process, raw HTTP/1.1) each send list
  requests back to back (a mix of plain, filtered+sorted and deep pages of /tasks, /services, /nodes);
- ``pathological``: the same load plus ``--bad-clients`` connections that send costly filters (a regex
  built from a field, regexes that are slow to compile, each a new pattern so no cache helps);
- in both, a probe thread opens a *fresh* connection every ``--probe-interval`` s and times
  ``GET /-/health`` (alternating with ``/-/ready``) from connect to the last byte.

Printed and saved as JSON (``--out``, default ``bench/results/fairness.json``; a section per label and
variant is merged into the file): probe p50/p99/max, list latency p50/p99/max and p99/median, status
counts (503 API013 when the admission queue is full), throughput. ``--repo`` runs another checkout's
``app/`` (e.g. ``git archive <commit> | tar -x -C /tmp/before``) with this checkout's virtualenv, for
before/after figures. Every loop is bounded in time and count; only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench`

from bench.localhttp import free_port, fresh_get
from bench.timing import percentile

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"
RESULTS = REPO / "bench" / "results" / "fairness.json"
START_TIMEOUT = 180.0
STOP_TIMEOUT = 20.0

LIST_PATHS = [
    "/tasks?limit=50",
    "/tasks?filter=" + quote('state == "running" && slot > 1') + "&sort=node&limit=50",
    "/services?limit=50",
    "/tasks?limit=200&offset=5000",
    "/nodes",
    "/tasks?sort=state&dir=desc&limit=100",
]


def bad_filters(count: int) -> list[str]:
    """Costly filters ≤ 512 characters, each pattern new (numbers vary) so no regex cache helps."""
    out = []
    for i in range(count):
        n = 300 + i % 100
        shapes = [
            f'id.matches(id + "\\\\pL{{{n}}}") || id.matches(service + "\\\\pN{{{n}}}") || '
            f'node.matches(id + "\\\\pL{{{n + 1}}}")',
            f'id.matches("(\\\\pL|\\\\pN){{{n}}}") || image.matches("\\\\pL{{{n + 2}}}\\\\pN{{{n}}}")',
            f'error.matches("[\\\\pL\\\\pN]{{{n},{n + 50}}}x") && state.matches("(a|b|\\\\pL){{{n}}}")',
        ]
        out.append(shapes[i % len(shapes)])
    return [expr for expr in out if len(expr) <= 512]


# The load generator runs in its own process (gevent, raw sockets): its hub must not skew the probes.
LOAD_SCRIPT = r"""
import json, re, socket, sys, time
from gevent import monkey; monkey.patch_all()
import gevent

port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
paths = json.loads(sys.argv[4])
label = sys.argv[5]
results = []   # (path index, status, seconds)
errors = [0]
stop_at = time.monotonic() + seconds

def read_response(sock, buf):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(max(65536, length - len(rest)))
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    if status >= 400:   # problems: count them by code (API013, FLT006, ...)
        code = re.search(rb'"code": ?"([A-Z]{3}[0-9]{3})"', rest[:length])
        status = "%d %s" % (status, code.group(1).decode() if code else "")
    return status, rest[length:]

def connect():
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock

def client(i):
    sock, buf, n = None, b"", 0
    while time.monotonic() < stop_at and n < 1_000_000:
        index = (i + n) % len(paths)
        request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n" % paths[index]).encode()
        started = time.monotonic()
        try:
            if sock is None:
                sock, buf = connect(), b""
            sock.sendall(request)
            status, buf = read_response(sock, buf)
            results.append((index, status, time.monotonic() - started))
        except Exception:
            errors[0] += 1
            if sock is not None:
                sock.close()
            sock = None
            gevent.sleep(0.05)
        n += 1
    if sock is not None:
        sock.close()

gevent.joinall([gevent.spawn(client, i) for i in range(clients)], timeout=seconds + 90)
json.dump({"label": label, "results": results, "errors": errors[0]}, sys.stdout)
"""


# ---------------------------------------------------------------------------------------------- server
def start_server(repo: Path, tasks: int, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "BENCH_TASKS": str(tasks), "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", "PYTHONPATH": str(repo)}
    env.pop("SERVICE_CONFIG", None)
    config = repo / "bench" / "gunicorn_synthetic.py"
    if not config.exists():
        config = REPO / "bench" / "gunicorn_synthetic.py"
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(PYTHON), "-m", "gunicorn", "-c", str(config), "wsgi:app"],
                                cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            status, body = fresh_get(port, "/-/health", timeout=2)
            if status == 200 and b'"ok"' in body:
                return proc, port
        except OSError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"gunicorn did not become healthy within {START_TIMEOUT:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)


# ---------------------------------------------------------------------------------------------- probes
class Prober(threading.Thread):
    """Fresh-connection probes of /-/health and /-/ready started at a fixed pace until stopped.

    Each probe runs in its own thread (at most ``MAX_IN_FLIGHT`` at once), so a slow answer does not
    delay the next probe and a stalled server still yields as many samples as a fast one."""

    MAX_IN_FLIGHT = 32

    def __init__(self, port: int, interval: float, max_probes: int = 100_000) -> None:
        super().__init__(daemon=True)
        self.port, self.interval, self.max_probes = port, interval, max_probes
        self.samples: dict[str, list[float]] = {"/-/health": [], "/-/ready": []}
        self.failures: Counter[str] = Counter()
        self.skipped = 0
        self.stopping = threading.Event()
        self._in_flight = threading.BoundedSemaphore(self.MAX_IN_FLIGHT)
        self._threads: list[threading.Thread] = []

    def _probe(self, path: str) -> None:
        started = time.monotonic()
        try:
            status, _ = fresh_get(self.port, path)
        except OSError as exc:
            self.failures[type(exc).__name__] += 1
        else:
            elapsed = time.monotonic() - started
            if status == 200 or (path == "/-/ready" and status == 503):  # no engine: ready says 503
                self.samples[path].append(elapsed)
            else:
                self.failures[f"{path} {status}"] += 1
        finally:
            self._in_flight.release()

    def run(self) -> None:
        for n in range(self.max_probes):
            if self.stopping.is_set():
                break
            if self._in_flight.acquire(blocking=False):
                path = "/-/health" if n % 2 == 0 else "/-/ready"
                thread = threading.Thread(target=self._probe, args=(path,), daemon=True)
                thread.start()
                self._threads.append(thread)
            else:
                self.skipped += 1
            self.stopping.wait(self.interval)
        for thread in self._threads:
            thread.join(timeout=15)


# ---------------------------------------------------------------------------------------------- figures
def summary(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    return {"n": len(samples), "p50_ms": round(p50 * 1000, 2), "p99_ms": round(p99 * 1000, 2),
            "max_ms": round(max(samples) * 1000, 2), "p99_over_p50": round(p99 / p50, 2) if p50 else None}


def load_process(port: int, clients: int, seconds: float, paths: list[str], label: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(PYTHON), "-c", LOAD_SCRIPT, str(port), str(clients), str(seconds),
                             json.dumps(paths), label], stdout=subprocess.PIPE, text=True)


def collect(proc: subprocess.Popen[str], seconds: float) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=seconds + 120)
    data: dict[str, Any] = json.loads(out)
    return data


def run_variant(port: int, args: argparse.Namespace, variant: str) -> dict[str, Any]:
    prober = Prober(port, args.probe_interval)
    loads = [load_process(port, args.clients, args.seconds, LIST_PATHS, "lists")]
    bad = bad_filters(400)
    if variant == "pathological":
        paths = ["/tasks?filter=" + quote(expr, safe="") for expr in bad]
        loads.append(load_process(port, args.bad_clients, args.seconds, paths, "filters"))
    time.sleep(min(2.0, args.seconds / 5))   # let the load ramp up before probing
    cpu_before = time.process_time()
    prober.start()
    started = time.monotonic()
    outputs = [collect(proc, args.seconds) for proc in loads]
    prober.stopping.set()
    prober.join(timeout=60)
    elapsed = time.monotonic() - started
    result: dict[str, Any] = {"variant": variant, "clients": args.clients, "seconds": args.seconds,
                              "probe": {path: summary(s) for path, s in prober.samples.items()},
                              "probe_all": summary([x for s in prober.samples.values() for x in s]),
                              "probe_failures": dict(prober.failures), "probes_skipped": prober.skipped,
                              "probe_cpu_s": round(time.process_time() - cpu_before, 2)}
    for output in outputs:
        rows = output["results"]
        statuses = Counter(str(status) for _, status, _ in rows)
        ok = [seconds for _, status, seconds in rows if status in (200, 206)]   # problems are "400 FLT006"
        section = {"statuses": dict(statuses), "errors": output["errors"], "latency": summary(ok),
                   "latency_all": summary([seconds for _, _, seconds in rows]),
                   "throughput_rps": round(len(rows) / max(elapsed, 1e-9), 1)}
        if output["label"] == "lists":
            per_path = {}
            for index, path in enumerate(LIST_PATHS):
                per_path[path] = summary([s for i, status, s in rows if i == index and status in (200, 206)])
            section["per_path"] = per_path
        else:
            section["bad_clients"] = args.bad_clients
            section["example_filter"] = bad[0]
        result[output["label"]] = section
    return result


def print_result(label: str, result: dict[str, Any]) -> None:
    probe, lists = result["probe_all"], result.get("lists", {}).get("latency", {})
    print(f"\n== {label} / {result['variant']}: {result['clients']} keep-alive clients, {result['seconds']} s")
    print(f"  fresh-connection /-/health+/-/ready: n={probe.get('n')} p50={probe.get('p50_ms')} ms "
          f"p99={probe.get('p99_ms')} ms max={probe.get('max_ms')} ms failures={result['probe_failures']}")
    for path, figures in result["probe"].items():
        print(f"    {path:10} p50={figures.get('p50_ms')} p99={figures.get('p99_ms')} max={figures.get('max_ms')}")
    print(f"  lists: n={lists.get('n')} p50={lists.get('p50_ms')} ms p99={lists.get('p99_ms')} ms "
          f"max={lists.get('max_ms')} ms p99/p50={lists.get('p99_over_p50')} "
          f"rps={result['lists']['throughput_rps']} statuses={result['lists']['statuses']} "
          f"errors={result['lists']['errors']}")
    if "filters" in result:
        bad = result["filters"]
        print(f"  costly filters ({bad['bad_clients']} clients): statuses={bad['statuses']} "
              f"latency={bad['latency_all']} errors={bad['errors']}")


def save(out: Path, label: str, results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    existing: dict[str, Any] = {}
    if out.exists():
        try:
            existing = json.loads(out.read_text())
        except ValueError:
            existing = {}
    existing[label] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "repo": str(args.repo),
                       "tasks": args.tasks, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                        "loadavg": Path("/proc/loadavg").read_text().strip()},
                       "variants": {r["variant"]: r for r in results}}
    out.write_text(json.dumps(existing, indent=2) + "\n")
    print(f"\nsaved to {out} under {label!r}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--bad-clients", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--probe-interval", type=float, default=0.05)
    parser.add_argument("--variant", choices=("load", "pathological", "all"), default="load")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose app/ gunicorn runs")
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 1000 or not 0 < args.seconds <= 600 or not 0 <= args.bad_clients <= 50:
        parser.error("clients 1..1000, seconds 0..600, bad clients 0..50")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    variants = ["load", "pathological"] if args.variant == "all" else [args.variant]
    with tempfile.TemporaryDirectory(prefix="shoal-fairness-") as tmp:
        log_path = Path(tmp) / "gunicorn.log"
        proc, port = start_server(args.repo.resolve(), args.tasks, log_path)
        results = []
        try:
            for variant in variants:
                result = run_variant(port, args, variant)
                print_result(args.label, result)
                results.append(result)
                if proc.poll() is not None:
                    raise SystemExit(f"gunicorn died during {variant}:\n{log_path.read_text()[-3000:]}")
        finally:
            stop_server(proc)
            if results:
                save(args.out, args.label, results, args)
            tail = log_path.read_text()[-2000:]
            if "WORKER TIMEOUT" in tail or "Traceback" in tail:
                print("gunicorn log tail:\n" + tail)


if __name__ == "__main__":
    main()
