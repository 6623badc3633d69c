"""Resources under hostile clients and a hung engine (docs/resilience.md), against a real gunicorn on 127.0.0.1 and the
lab engine: a frozen dockerd (SIGSTOP) is seen as stale within seconds; log tails that never read, on a
service writing big lines, keep the worker's memory bounded; connections that never send a request head do
not make a new client wait their keep-alive time. Every load is bounded in count and time."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import gevent
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hostile_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(base URL, worker pid) of a gunicorn of its own (the tests freeze its engine and load it)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    directory = tmp_path_factory.mktemp("hostile")
    log_path = directory / "server.log"
    proc = launch_gunicorn(gunicorn_env(docker_host, port, SERVICE_LOG_LEVEL="warn",
                                        SERVICE_DATA_DIR=str(directory / "state")), log_path, base)
    yield base, worker_pid(proc.pid)
    stop_gunicorn(proc, log_path, check_code=False)


def worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def dockerd_pid() -> int:
    lab_dir, name = os.environ.get("SHOAL_LAB_DIR"), os.environ.get("SHOAL_LAB_NAME")
    if not lab_dir or not name:
        pytest.fail("SHOAL_LAB_DIR/SHOAL_LAB_NAME unset: run through scripts/lab-pytest", pytrace=False)
    return int((Path(lab_dir) / name / "n1" / "dockerd.pid").read_text().strip())


# ---------------------------------------------------------------------------------------------- hung engine
def test_a_frozen_engine_is_stale_within_three_seconds(hostile_server: tuple[str, int]) -> None:
    base, _ = hostile_server
    wait_for(lambda: requests.get(f"{base}/-/ready", timeout=5).status_code == 200, 30, message="ready")
    pid = dockerd_pid()
    os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        def stale() -> bool:
            return requests.get(f"{base}/-/ready", timeout=2).status_code == 503
        wait_for(stale, 15, interval=0.05, message="readiness says not ready")
        detected = time.monotonic() - frozen
        nodes = requests.get(f"{base}/nodes", timeout=2)
        assert nodes.status_code == 200 and nodes.headers["Cache-Freshness"] == "stale", nodes.headers
        ready = requests.get(f"{base}/-/ready", timeout=2).json()
        assert ready["engineConnected"] is False and ready["status"] == "not_ready", ready
        metrics = requests.get(f"{base}/-/metrics", timeout=2).text
        assert 'shoal_engine_connected 0.0' in metrics
        assert 'shoal_watcher_incidents_total{incident="probe_failure"} 0.0' not in metrics
        assert 'shoal_watcher_incidents_total{incident="probe_failure"}' in metrics
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"\nfrozen engine → /-/ready 503 and Cache-Freshness stale after {detected:.2f} s")
    assert detected < 3.0, f"a frozen engine was noticed after {detected:.2f} s"
    thawed = time.monotonic()
    wait_for(lambda: requests.get(f"{base}/-/ready", timeout=5).status_code == 200, 30, message="live again")
    print(f"engine thawed → ready again after {time.monotonic() - thawed:.2f} s")
    assert requests.get(f"{base}/nodes", timeout=5).headers["Cache-Freshness"] == "live"


# ---------------------------------------------------------------------------------------------- log readers
# 1 MB lines at about 20 MB/s. No log rotation: a rotating json-file throttles its followers so much that
# the old frame-bounded queues hardly filled. 32 readers: the lab's one dockerd feeds 128 followers of one
# service too slowly to fill anything in a test's time (bench/bench_hostile.py: old code +121 MiB with 32
# readers in 30 s, +11 MiB with 128).
LOUD_SCRIPT = "while true; do head -c 1000000 /dev/zero | tr '\\0' x; echo; sleep 0.05; done"
READERS = 32
SECONDS = 20
RSS_GROWTH_MIB = 48           # 32 x (256 KiB queue + one 16 KiB frame + the chunk being written) ≈ 17 MiB


@pytest.fixture
def loud_service(dclient: docker.DockerClient) -> Iterator[Any]:
    """A throw-away service writing 1 MB lines (~400 MB of json-file log in a run, removed with it)."""
    service = dclient.services.create(
        IMAGE, ["sh", "-c", LOUD_SCRIPT], name=f"t-loud-{uuid.uuid4().hex[:8]}", labels={TEST_LABEL: "1"},
        init=True, mode=docker.types.ServiceMode("replicated", replicas=1),
        endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"), log_driver="json-file")
    try:
        wait_for(lambda: any(t["Status"]["State"] == "running" for t in service.tasks()), 30,
                 message="the loud service runs")
        yield service
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            service.remove()


def open_streams(base: str) -> float:
    """``shoal_open_streams`` from ``/-/metrics`` (SSE, log and metrics streams)."""
    for line in requests.get(f"{base}/-/metrics", timeout=5).text.splitlines():
        if line.startswith("shoal_open_streams "):
            return float(line.split()[1])
    raise AssertionError("no shoal_open_streams in /-/metrics")


def stalled_reader(base: str, path: str) -> socket.socket:
    """A client that asks for a live tail and never reads (tiny receive buffer)."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


def test_log_readers_that_never_read_keep_the_worker_bounded(hostile_server: tuple[str, int],
                                                             loud_service: Any) -> None:
    base, pid = hostile_server
    wait_for(lambda: requests.get(f"{base}/services/{loud_service.id}", timeout=5).status_code == 200, 15,
             message="service cached")
    gevent.sleep(5.0)      # not a wait: 5 s of 1 MB lines make the backlog the tails replay (since=60s)
    before = rss_mib(pid)
    readers: list[socket.socket] = []
    try:
        for _ in range(READERS):
            readers.append(stalled_reader(base, f"/services/{loud_service.id}/logs?since=60s"))
        wait_for(lambda: open_streams(base) >= READERS, 10, message="every stalled reader has its stream")
        peak, latencies = before, []
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            gevent.sleep(1.0)   # the sampling period of this measurement, not a wait
            peak = max(peak, rss_mib(pid))
            started = time.monotonic()
            assert requests.get(f"{base}/-/health", timeout=10).status_code == 200
            latencies.append(time.monotonic() - started)
    finally:
        for sock in readers:
            sock.close()
    growth = peak - before
    print(f"\n{READERS} stalled log readers of 1 MB lines: worker RSS {before:.0f} → peak {peak:.0f} MiB "
          f"(+{growth:.0f}); /-/health while stalled: max {max(latencies) * 1000:.0f} ms")
    assert growth < RSS_GROWTH_MIB, f"worker RSS grew by {growth:.0f} MiB"
    assert max(latencies) < 1.0
    wait_for(lambda: open_streams(base) == 0, 10, message="every slot released once the readers are gone")


# ---------------------------------------------------------------------------------------------- half-open
HALF_OPEN = 2500              # more than worker_connections (2,000): every slot held, 500 more in the backlog


def test_half_open_connections_do_not_make_a_new_client_wait_their_keepalive(
        hostile_server: tuple[str, int]) -> None:
    """Before: the 2,000 slots stayed held until gunicorn's 5 s head timeout; a new client waited 5 s."""
    base, _ = hostile_server
    port = int(base.rsplit(":", 1)[1])
    idle: list[socket.socket] = []
    try:
        for _ in range(HALF_OPEN):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"GET /-/health HTTP/1.1\r\nHost: x\r\n")     # the head never ends
            idle.append(sock)
        started = time.monotonic()
        answer = requests.get(f"{base}/-/health", timeout=30)
        waited = time.monotonic() - started
        assert answer.status_code == 200
        closed = sum(1 for sock in idle[:100] if read_eof(sock))
    finally:
        for sock in idle:
            sock.close()
    print(f"\n{HALF_OPEN} half-open connections: a new client answered after {waited:.2f} s")
    assert waited < 2.0, f"a new client waited {waited:.2f} s"
    assert closed == 100, "the oldest half-open connections are closed by the server"


def read_eof(sock: socket.socket) -> bool:
    sock.settimeout(5)
    with contextlib.suppress(OSError):
        return sock.recv(1) == b""
    return False
