"""Configuration as the real processes see it: gunicorn refuses a bad value with one line and status 2;
``shoal`` serves TLS with the configured pair, and both servers listen on unix sockets.

No engine is needed: the servers point at a docker socket that does not exist, and ``/-/health`` answers
200 (status "error") before the first sync. Only 127.0.0.1 and unix sockets are used.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.conftest import REPO, free_port, wait_for
from tests.transport import get_over_unix, make_self_signed

pytestmark = pytest.mark.integration
BIN = REPO / ".venv" / "bin"
TIMEOUT = 20


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to 107 bytes); also the HOME of the processes."""
    with tempfile.TemporaryDirectory(prefix="shoal-cfg-", dir="/tmp") as name:
        yield Path(name)


def environment(workdir: Path, **values: str) -> dict[str, str]:
    """The test's environment without SERVICE_*/DOCKER_HOST, with no engine and a private HOME."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("SERVICE_", "GUNICORN_")) and name != "DOCKER_HOST"}
    return {**env, "HOME": str(workdir), "XDG_CONFIG_HOME": str(workdir / "xdg"),
            "SERVICE_DOCKER_HOST": f"unix://{workdir}/no-engine.sock", "SERVICE_LOG_FORMAT": "text",
            "SERVICE_DATA_DIR": str(workdir / "state"), **values}


@contextmanager
def process(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` in the repository, output to ``log``; kill it if it is still running at the end."""
    with log.open("wb") as output:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)


def stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not stop within {TIMEOUT} s of SIGTERM:\n{log.read_text()[-4000:]}", pytrace=False)
    assert code == 0, log.read_text()[-4000:]


def wait_for_unix_health(proc: subprocess.Popen[bytes], path: str, log: Path) -> bytes:
    def answered() -> bytes | None:
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
        status, body = get_over_unix(path, "/-/health")
        return body if status == 200 else None

    body = wait_for(answered, TIMEOUT, interval=0.2, message=f"/-/health on unix:{path}")
    assert isinstance(body, bytes)
    return body


def test_gunicorn_refuses_a_bad_value_with_one_line_and_status_2(workdir: Path) -> None:
    env = environment(workdir, SERVICE_LISTEN_ADDR=f"unix:{workdir}/s.sock", SERVICE_OPERATIONS_LEVEL="9")
    proc = subprocess.run([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("shoal: configuration error: SERVICE_OPERATIONS_LEVEL")
    assert not (workdir / "s.sock").exists()


def test_gunicorn_serves_on_a_unix_socket_and_warns_once_about_ignored_keys(workdir: Path) -> None:
    socket_path, log = f"{workdir}/s.sock", workdir / "gunicorn.log"
    env = environment(workdir, SERVICE_LISTEN_ADDR=f"unix:{socket_path}", SERVICE_PPROF="true",
                      SERVICE_LISTEN_ADR=":1")
    with process([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"], env, log) as proc:
        assert b'"status":"error"' in wait_for_unix_health(proc, socket_path, log)
        stop(proc, log)
    output = log.read_text()
    assert output.count("not implemented in this version, ignored: SERVICE_PPROF") == 1, output
    assert output.count("unknown configuration keys ignored: SERVICE_LISTEN_ADR") == 1, output
    assert "Traceback" not in output, output


def test_shoal_serves_tls_with_the_configured_pair_and_hsts(workdir: Path) -> None:
    cert, key = make_self_signed(workdir)
    port, log = free_port(), workdir / "shoal.log"
    env = environment(workdir, SERVICE_LISTEN_ADDR=f"127.0.0.1:{port}", SERVICE_TLS_CERT=cert, SERVICE_TLS_KEY=key)
    url = f"https://127.0.0.1:{port}/-/health"
    with process([str(BIN / "shoal")], env, log) as proc:
        def answered() -> requests.Response:
            assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            return requests.get(url, verify=cert, timeout=5, allow_redirects=False)

        response = wait_for(answered, TIMEOUT, interval=0.2, message=f"GET {url}")
        assert isinstance(response, requests.Response)
        assert response.status_code == 200, response.text
        assert response.headers["Strict-Transport-Security"] == "max-age=63072000; includeSubDomains"
        assert response.json()["status"] == "error"  # no engine: alive, not synced
        stop(proc, log)
    assert "Traceback" not in log.read_text()


def test_shoal_serves_on_a_unix_socket_and_removes_it_at_exit(workdir: Path) -> None:
    socket_path, log = f"{workdir}/s.sock", workdir / "shoal.log"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(socket_path)  # left behind by a killed process: replaced
    env = environment(workdir, SERVICE_LISTEN_ADDR=f"unix://{socket_path}")
    with process([str(BIN / "shoal")], env, log) as proc:
        assert b'"@type":"Health"' in wait_for_unix_health(proc, socket_path, log)
        stop(proc, log)
    assert not Path(socket_path).exists()
    assert "Traceback" not in log.read_text()
