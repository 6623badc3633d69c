"""Shared fixtures. Integration tests get the real lab swarm from a session fixture; a missing engine is
a failure with the reason, never a skip.

Run pytest under ``python -m gevent.monkey --module pytest`` (scripts/test does), so the watcher's
greenlets and the docker SDK's sockets cooperate inside the test process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from app import create_app
from app.config import Settings
from app.runtime import Runtime, runtime_of

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "scripts" / "lab-swarm"


def wait_for(condition: Callable[[], object], timeout: float, interval: float = 0.05,
             message: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # the condition may race with the engine; retry until the deadline
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_error})" if last_error else ""))


def lab(*args: str, timeout: float = 600) -> str:
    """Run the lab script; return the DOCKER_HOST it prints, failing the test run with its output."""
    proc = subprocess.run([str(LAB), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"scripts/lab-swarm {' '.join(args)} failed ({proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}", pytrace=False)
    hosts = [line.split("=", 1)[1] for line in proc.stdout.splitlines() if line.startswith("DOCKER_HOST=")]
    return hosts[-1] if hosts else ""


def check_engine(host: str) -> docker.APIClient:
    client = docker.APIClient(base_url=host, version="1.41", timeout=30)
    try:
        state = client.info()["Swarm"]["LocalNodeState"]
    except Exception as exc:
        pytest.fail(f"the lab engine at {host} does not answer: {exc}", pytrace=False)
    if state != "active":
        pytest.fail(f"the engine at {host} is not a swarm manager (state {state!r})", pytrace=False)
    return client


@pytest.fixture(scope="session")
def docker_host() -> str:
    """The lab swarm's DOCKER_HOST: from scripts/test, or started here (idempotent)."""
    host = os.environ.get("SHOAL_TEST_DOCKER_HOST") or lab("up")
    if not host:
        pytest.fail("scripts/lab-swarm up printed no DOCKER_HOST line", pytrace=False)
    check_engine(host)
    return host


@pytest.fixture(scope="session")
def engine(docker_host: str) -> docker.APIClient:
    return check_engine(docker_host)


def start_runtime_app(host: str, **overrides: object):  # type: ignore[no-untyped-def]
    settings = Settings(docker_host=host, task_poll_interval=0.5, **overrides)  # type: ignore[arg-type]
    app = create_app(settings, configure_logging=False)
    runtime = runtime_of(app)
    runtime.start()
    wait_for(lambda: runtime.cache.freshness.synced, 30, message="first full sync")
    return app, runtime


@pytest.fixture(scope="session")
def live_app(docker_host: str) -> Iterator[tuple[object, Runtime]]:
    """An in-process app whose watcher follows the lab swarm (Flask test client + real engine)."""
    app, runtime = start_runtime_app(docker_host)
    yield app, runtime
    runtime.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real thing: gunicorn with the gevent worker on 127.0.0.1, following the lab swarm."""
    import requests

    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn") / "server.log"
    env = {**os.environ, "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "info", "SERVICE_WATCHER_TASK_POLL_INTERVAL": "0.5"}
    env.pop("SERVICE_CONFIG", None)
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{base}/-/ready", timeout=2).status_code == 200, 30,
                 interval=0.2, message="gunicorn readiness")
    except AssertionError:
        proc.kill()
        pytest.fail(f"gunicorn did not become ready:\n{log_path.read_text()[-4000:]}", pytrace=False)
    yield base
    proc.terminate()
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("gunicorn did not stop within 20 s of SIGTERM", pytrace=False)
    assert code == 0, f"gunicorn exited with {code}:\n{log_path.read_text()[-4000:]}"
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-4000:]
