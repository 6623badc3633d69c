"""SSE fan-out through gunicorn: the latency from a cache change to the LAST of 256 clients receiving it, and
the memory one idle stream costs the worker.

    .venv/bin/python bench/bench_sse.py [--clients 256] [--rate 100] [--seconds 10] [--tasks 2000]

The server is ``bench/gunicorn_sse.py``: the production gunicorn settings, a synthetic cache and an
in-worker change driver that stamps each service update with its wall-clock time (label ``bench.sent``).
The clients are raw sockets in this process (gevent), half on ``/events`` and half on ``/services``; each
notes when a change's stamp first arrives. Per change, the latency is the slowest client's; the report gives
p50/p99/max of that (the batch window, 100 ms by default, is included), how many clients got every change,
and RSS of the worker per idle stream (RSS with the streams open and idle minus before, over the count).
Results go to ``bench/results/sse.json``. Only 127.0.0.1 is contacted; every wait is bounded.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.localhttp import free_port  # noqa: E402
from bench.timing import percentile  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sse.json"
STAMP = re.compile(rb'"bench\.sent":"([0-9.]+)"')
DONE = b'"bench.done":"1"'


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def worker_pid(master: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("no gunicorn worker")


def get(port: int, path: str, timeout: float = 10) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def open_streams_gauge(port: int) -> float:
    _, body = get(port, "/-/metrics")
    match = re.search(rb"^shoal_open_streams (\S+)$", body, re.M)
    return float(match.group(1)) if match else -1.0


class Listener:
    """One raw SSE connection; records the first arrival time of each change stamp."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.arrivals: dict[bytes, float] = {}
        self.done = False
        self.bytes = 0

    def run(self, deadline: float) -> None:
        tail = b""
        while not self.done and time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(262144)
            except OSError:
                return
            if not chunk:
                return
            now = time.time()
            self.bytes += len(chunk)
            data = tail + chunk
            for stamp in STAMP.findall(data):
                self.arrivals.setdefault(stamp, now)
            if DONE in data:
                self.done = True
            tail = data[-64:]

    def close(self) -> None:
        self.sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tasks", type=int, default=2000)
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}", "SERVICE_LOG_LEVEL": "warn",
           "BENCH_TASKS": str(args.tasks), "BENCH_SSE_CLIENTS": str(args.clients),
           "BENCH_SSE_RATE": str(args.rate), "BENCH_SSE_SECONDS": str(args.seconds)}
    env.pop("SERVICE_CONFIG", None)
    server = subprocess.Popen([str(ROOT / ".venv" / "bin" / "gunicorn"), "-c", "bench/gunicorn_sse.py", "wsgi:app"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listeners: list[Listener] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                status, body = get(port, "/-/health", 2)   # no watcher here: /-/ready never says connected
                if status == 200 and b'"status":"ok"' in body:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit("gunicorn did not become ready")
        worker = worker_pid(server.pid)
        time.sleep(1.0)
        before = rss_kib(worker)
        # Open all but the driver's trigger count first, measure idle, then the rest start the run.
        for index in range(args.clients - 1):
            listeners.append(Listener(port, "/events" if index % 2 == 0 else "/services"))
        wait = time.monotonic() + 30
        while open_streams_gauge(port) < args.clients - 1 and time.monotonic() < wait:
            time.sleep(0.1)
        time.sleep(1.0)
        idle = rss_kib(worker)
        per_stream_kib = (idle - before) / max(1, args.clients - 1)
        run_deadline = time.monotonic() + args.seconds + 60
        listeners.append(Listener(port, "/services"))
        readers = [gevent.spawn(listener.run, run_deadline) for listener in listeners]
        gevent.joinall(readers, timeout=args.seconds + 70)
        loaded = rss_kib(worker)
    finally:
        for listener in listeners:
            listener.close()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    stamps = set().union(*(listener.arrivals for listener in listeners))
    latencies = []
    complete = 0
    for stamp in stamps:
        sent = float(stamp)
        arrivals = [listener.arrivals[stamp] for listener in listeners if stamp in listener.arrivals]
        complete += len(arrivals) == len(listeners)
        latencies.append(max(arrivals) - sent)
    if not latencies:
        raise SystemExit("no change arrived")
    result: dict[str, Any] = {
        "clients": len(listeners), "rate_per_s": args.rate, "seconds": args.seconds, "tasks": args.tasks,
        "changes_seen": len(stamps), "changes_at_every_client": complete,
        "last_client_latency_ms": {"p50": round(percentile(latencies, 50) * 1000, 1),
                                   "p99": round(percentile(latencies, 99) * 1000, 1),
                                   "max": round(max(latencies) * 1000, 1)},
        "worker_rss_kib": {"before_streams": before, "idle_streams": idle, "after_run": loaded},
        "idle_stream_kib": round(per_stream_kib, 1),
        "bytes_per_client": round(sum(listener.bytes for listener in listeners) / len(listeners)),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    lat = result["last_client_latency_ms"]
    print(f"SSE fan-out: {result['clients']} clients, {args.rate:g} changes/s for {args.seconds:g} s "
          f"({len(stamps)} changes seen, {complete} at every client)")
    print(f"  change → last client: p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms "
          "(batch window included; target p99 ≤ 250 ms)")
    print(f"  memory per idle stream: {result['idle_stream_kib']} KiB of worker RSS (target ≤ 50 KB)")
    print(f"  results: {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
