"""SIGTERM on a real gunicorn following the lab swarm (docs/resilience.md): a write held by ``Prefer: wait`` on a long
rollout is answered at once with the rollout so far, the streams end with their final frame, the state store
is closed and the worker exits well inside ``graceful_timeout`` (10 s); a request that never ends (a body
that never comes) still lets the store close before the master's SIGKILL."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import gevent
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration
GRACEFUL_TIMEOUT = 10.0
FINAL_FRAME = b":shutdown\nretry: 5000\n\n"


def start(docker_host: str, directory: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = directory / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(directory / "state"))
    return launch_gunicorn(env, log_path, base), base, log_path


def open_raw_stream(base: str, path: str) -> socket.socket:
    """An event stream on a raw socket (its bytes are read after the stop, in full)."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
    head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return sock


def read_to_end(sock: socket.socket, seconds: float) -> bytes:
    sock.settimeout(seconds)
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.fixture
def slow_rollout(dclient: docker.DockerClient) -> Iterator[Any]:
    """Two replicas updated one at a time with 60 s between them: a restart's rollout lasts over a minute."""
    service = sleeper(dclient, f"t-shutdown-{uuid.uuid4().hex[:8]}", replicas=2,
                      update_config=docker.types.UpdateConfig(parallelism=1, delay=60_000_000_000))
    yield service
    with contextlib.suppress(docker.errors.NotFound):
        service.remove()


def stop_and_time(proc: subprocess.Popen[bytes], log_path: Path) -> float:
    started = time.monotonic()
    proc.terminate()
    try:
        code = proc.wait(timeout=GRACEFUL_TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"gunicorn did not stop after SIGTERM:\n{log_path.read_text()[-4000:]}", pytrace=False)
    assert code == 0, log_path.read_text()[-4000:]
    return time.monotonic() - started


def test_sigterm_answers_a_waiting_write_ends_streams_and_closes_the_store(
        docker_host: str, engine: docker.APIClient, slow_rollout: Any, tmp_path: Path) -> None:
    proc, base, log_path = start(docker_host, tmp_path)
    try:
        wait_for(lambda: requests.get(f"{base}/services/{slow_rollout.id}", timeout=5).status_code == 200, 15,
                 message="service cached")
        before = engine.inspect_service(slow_rollout.id)["Spec"]["TaskTemplate"].get("ForceUpdate", 0)
        streams = [open_raw_stream(base, path) for path in ("/events", "/services", f"/services/{slow_rollout.id}")]
        waiting = gevent.spawn(requests.post, f"{base}/services/{slow_rollout.id}/restart",
                               headers={"Prefer": "wait=120"}, timeout=60)
        wait_for(lambda: (engine.inspect_service(slow_rollout.id).get("UpdateStatus") or {}).get("State")
                 == "updating", 15, message="the rollout started")
        gevent.sleep(1.0)   # not a wait: a window in which the write must keep waiting for its rollout
        assert not waiting.ready(), "the write should still be waiting for its rollout"
        signalled = time.monotonic()
        proc.terminate()
        response = waiting.get(timeout=GRACEFUL_TIMEOUT)
        answered = time.monotonic() - signalled
        code = proc.wait(timeout=GRACEFUL_TIMEOUT + 5)
        stopped = time.monotonic() - signalled
        tails = [read_to_end(sock, 5) for sock in streams]
    finally:
        if proc.poll() is None:
            proc.kill()
    log = log_path.read_text()
    assert code == 0, log[-4000:]
    assert response.status_code == 200, response.text
    rollout = response.json()["rollout"]
    assert rollout["settled"] is False and rollout["state"] == "interrupted", rollout
    assert rollout["updateState"] == "updating", rollout
    assert response.headers["Preference-Applied"] == "wait=120"
    assert engine.inspect_service(slow_rollout.id)["Spec"]["TaskTemplate"]["ForceUpdate"] == before + 1
    assert answered < 2.0, f"the waiting write was answered {answered:.2f} s after SIGTERM"
    assert stopped < GRACEFUL_TIMEOUT - 4, f"the worker took {stopped:.2f} s to stop"
    for tail in tails:
        assert tail.endswith(b"0\r\n\r\n") and FINAL_FRAME in tail, tail[-300:]
    assert "state store closed" in log and "runtime stopped" in log, log[-4000:]
    assert "graceful timeout" not in log and "Traceback" not in log, log[-4000:]
    print(f"\nSIGTERM → waiting write answered in {answered * 1000:.0f} ms; worker exited in {stopped:.2f} s")


def test_a_request_that_never_ends_does_not_keep_the_store_open(docker_host: str, tmp_path: Path) -> None:
    """A write whose body never comes holds its connection past graceful_timeout: the runtime is stopped
    (store closed) before the master's SIGKILL anyway."""
    proc, base, log_path = start(docker_host, tmp_path)
    try:
        service = requests.get(f"{base}/services", params={"search": "demo_ticker"}, timeout=10).json()["items"][0]
        port = int(base.rsplit(":", 1)[1])
        stuck = socket.create_connection(("127.0.0.1", port), timeout=30)
        stuck.sendall(f"PUT /services/{service['ID']}/scale HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                      "\r\nContent-Length: 100\r\n\r\n{".encode())
        # A connection opened after it is answered: the one worker accepts connections in order and reads the
        # stuck request's head first, so its view is waiting for the body by then.
        assert requests.get(f"{base}/-/health", timeout=10).status_code == 200
        stopped = stop_and_time(proc, log_path)
    finally:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(Exception):
            stuck.close()
    log = log_path.read_text()
    assert "requests still running near the graceful timeout" in log, log[-4000:]
    assert "state store closed" in log, log[-4000:]
    assert stopped < GRACEFUL_TIMEOUT + 2, f"the stop took {stopped:.2f} s"
    print(f"\nSIGTERM with a request that never ends: store closed, exit after {stopped:.2f} s")
