"""Fairness of the real server (gunicorn, one gevent worker, following the lab swarm): while keep-alive
clients hammer lists, a fresh connection's /-/health still answers quickly, lists stay within a small
multiple of their median, and clients that hang up while waiting leave nothing behind in the gate."""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.integration

LOAD_CLIENTS = 50
LOAD_SECONDS = 4.0
PROBE_BOUND_P99 = 0.5        # loose for CI; the bench measures the real figure (bench/bench_fairness.py)

# The load runs in its own process so that its greenlets never delay the probes' own timing.
LOAD_SCRIPT = r"""
import json, socket, sys, time
from gevent import monkey; monkey.patch_all()
import gevent

port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
paths = ["/tasks", "/services", "/tasks?sort=state&dir=desc", "/nodes"]
latencies, statuses = [], {}
stop_at = time.monotonic() + seconds

def read_response(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next((int(l.split(b":", 1)[1]) for l in lines[1:] if l.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    return int(lines[0].split()[1])

def client(i):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    n = 0
    try:
        while time.monotonic() < stop_at and n < 100_000:
            started = time.monotonic()
            path = paths[(i + n) % 4]
            sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n" % path).encode())
            status = read_response(sock)
            latencies.append(time.monotonic() - started)
            statuses[status] = statuses.get(status, 0) + 1
            n += 1
    finally:
        sock.close()

gevent.joinall([gevent.spawn(client, i) for i in range(clients)], timeout=seconds + 30, raise_error=True)
json.dump({"latencies": latencies, "statuses": statuses}, sys.stdout)
"""


def nearest_rank(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def fresh_health(port: int) -> float:
    """Seconds from connect to the last byte of /-/health on a new connection."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /-/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    return time.monotonic() - started


def gate_metrics(port: int) -> dict[str, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /-/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    text = data.partition(b"\r\n\r\n")[2].decode()
    return {name: float(value) for name, value in re.findall(r"^(shoal_admission_\S+) (\S+)$", text, re.M)}


def hang_up_after_request(port: int, count: int) -> None:
    """Clients that send a list request and close at once, without reading the answer."""
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /tasks HTTP/1.1\r\nHost: x\r\n\r\n")


def test_health_answers_fresh_connections_quickly_while_lists_are_hammered(server: str) -> None:
    port = int(server.rsplit(":", 1)[1])
    before = gate_metrics(port)
    load = subprocess.Popen([sys.executable, "-c", LOAD_SCRIPT, str(port), str(LOAD_CLIENTS), str(LOAD_SECONDS)],
                            stdout=subprocess.PIPE, text=True)
    probes: list[float] = []
    try:
        wait_for(lambda: gate_metrics(port).get("shoal_admission_wait_seconds_count", 0.0)
                 >= before.get("shoal_admission_wait_seconds_count", 0.0) + LOAD_CLIENTS, 30, interval=0.05,
                 message="the load running (a request per client through the gate)")
        halfway, deadline = time.monotonic() + 1.0, time.monotonic() + LOAD_SECONDS - 1.0
        hung_up = False
        while time.monotonic() < deadline and len(probes) < 200:
            probes.append(fresh_health(port))
            if not hung_up and time.monotonic() > halfway:
                hang_up_after_request(port, 100)         # while the gate is busy: they wait, then are skipped
                hung_up = True
            time.sleep(0.02)   # the probes' pacing, not a wait
        assert hung_up
        out, _ = load.communicate(timeout=LOAD_SECONDS + 60)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait(timeout=10)
    assert load.returncode == 0
    result = json.loads(out)
    latencies = result["latencies"]
    assert set(result["statuses"]) == {"200"}, result["statuses"]
    assert len(latencies) >= LOAD_CLIENTS * 5, "the load did not run"
    assert len(probes) >= 20
    probe_p99 = nearest_rank(probes, 99)
    assert probe_p99 < PROBE_BOUND_P99, f"fresh /-/health p99 {probe_p99 * 1000:.0f} ms under load"
    list_p50, list_p99 = nearest_rank(latencies, 50), nearest_rank(latencies, 99)
    print(f"fresh /-/health p50 {nearest_rank(probes, 50) * 1000:.1f} ms, p99 {probe_p99 * 1000:.1f} ms, "
          f"max {max(probes) * 1000:.1f} ms; lists ({len(latencies)}) p50 {list_p50 * 1000:.1f} ms, "
          f"p99 {list_p99 * 1000:.1f} ms")
    assert list_p99 <= 5 * list_p50 + 0.05, f"list p99 {list_p99 * 1000:.0f} ms at median {list_p50 * 1000:.0f} ms"

    # The lists went through the gate and queued; the clients that hung up left no waiter behind.
    def settled() -> dict[str, float] | None:
        figures = gate_metrics(port)
        return figures if figures["shoal_admission_waiting"] == 0 and figures["shoal_admission_busy"] == 0 else None

    after = wait_for(settled, 10, interval=0.1, message="an empty admission queue")
    assert isinstance(after, dict)
    admitted = after["shoal_admission_wait_seconds_count"] - before["shoal_admission_wait_seconds_count"]
    assert admitted >= len(latencies)
    waited = admitted - (after['shoal_admission_wait_seconds_bucket{le="0.001"}']
                         - before['shoal_admission_wait_seconds_bucket{le="0.001"}'])
    assert waited > 0
    full = 'shoal_admission_rejected_total{reason="full"}'
    gone = 'shoal_admission_rejected_total{reason="client_gone"}'
    assert after[full] == before[full]
    assert after[gone] - before[gone] >= 1, "no hung-up client was recognised while it waited"
    assert fresh_health(port) < PROBE_BOUND_P99
