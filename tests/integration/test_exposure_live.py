"""Start-up exposure warnings and strict trusted-proxy parsing, as the real processes see them
(``app.config.exposure``): gunicorn and ``shoal`` against the lab engine.

- the defaults (``auth.mode = none``, level 1) on every interface: one structured WARNING at start, and
  ``/-/ready`` says ``unauthenticatedWrites: true``; on loopback (gunicorn's ``-b`` wins over
  ``server.listen_addr``) neither;
- ``SERVICE_TRUSTED_PROXIES=192.168.1.10/1``: exit status 2 and one line naming the key and the value;
  ``0.0.0.0/0``: a warning at start.

The servers listening on every interface are only ever asked over 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import REPO, free_port, gunicorn_env, wait_for

pytestmark = pytest.mark.integration
BIN = REPO / ".venv" / "bin"
WARNING = "writes are allowed WITHOUT AUTHENTICATION"


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> dict[str, Any]:
    def answered() -> dict[str, Any] | None:
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            answer = requests.get(f"http://127.0.0.1:{port}/-/ready", timeout=2)
        except requests.ConnectionError:
            return None
        body: dict[str, Any] = answer.json()
        return body if answer.status_code == 200 else None

    found = wait_for(answered, 30, interval=0.2, message="/-/ready 200 (first sync with the lab engine)")
    assert isinstance(found, dict)
    return found


def records(log: Path) -> list[dict[str, Any]]:
    """The JSON log lines (gunicorn's own plain lines skipped)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def warnings_of(log: Path, event: str) -> list[dict[str, Any]]:
    return [r for r in records(log) if r.get("event") == event and r.get("level", "").upper().startswith("WARN")]


def env_for(docker_host: str, port: int, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path / "state"), SERVICE_LOG_FORMAT="json",
                       **extra)
    return {name: value for name, value in env.items() if not name.startswith("GUNICORN_")}


def test_gunicorn_on_every_interface_warns_once_and_ready_says_so(docker_host: str, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "open.log"
    env = env_for(docker_host, port, tmp_path)
    with running([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-b", f"0.0.0.0:{port}", "wsgi:app"],
                 env, log) as proc:
        body = ready(proc, port, log)
        assert body["unauthenticatedWrites"] is True
    (warning,) = warnings_of(log, "unauthenticated_writes")
    assert WARNING in warning["msg"] and f"0.0.0.0:{port}" in warning["msg"]
    assert warning["listen"] == [f"0.0.0.0:{port}"] and warning["operations_level"] == 1


def test_gunicorn_on_loopback_or_read_only_does_not_warn(docker_host: str, tmp_path: Path) -> None:
    for name, extra, bind in (("loopback", {}, "127.0.0.1"), ("read-only", {"SERVICE_OPERATIONS_LEVEL": "0"},
                                                                  "0.0.0.0")):
        port, log = free_port(), tmp_path / f"{name}.log"
        env = env_for(docker_host, port, tmp_path, SERVICE_LISTEN_ADDR=f"0.0.0.0:{port}", **extra)
        with running([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-b", f"{bind}:{port}", "wsgi:app"],
                     env, log) as proc:
            assert ready(proc, port, log)["unauthenticatedWrites"] is False, name
        assert warnings_of(log, "unauthenticated_writes") == [], name
        assert WARNING not in log.read_text(), name


def test_shoal_on_every_interface_warns(docker_host: str, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "shoal.log"
    env = env_for(docker_host, port, tmp_path, SERVICE_LISTEN_ADDR=f"0.0.0.0:{port}")
    with running([str(BIN / "shoal")], env, log) as proc:
        assert ready(proc, port, log)["unauthenticatedWrites"] is True
    assert len(warnings_of(log, "unauthenticated_writes")) == 1


def test_trusted_proxies_with_host_bits_refuse_to_start(docker_host: str, tmp_path: Path) -> None:
    env = env_for(docker_host, free_port(), tmp_path, SERVICE_AUTH_MODE="headers",
                  SERVICE_AUTH_HEADERS_SUBJECT="X-User", SERVICE_TRUSTED_PROXIES="10.0.0.5, 192.168.1.10/1")
    for command in ([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"], [str(BIN / "shoal")]):
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, (command, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith("shoal: configuration error: SERVICE_TRUSTED_PROXIES")
        assert "server.trusted_proxies" in lines[0] and "'192.168.1.10/1'" in lines[0]
        assert "host bits set" in lines[0]


def test_trusting_every_address_is_warned_at_start(docker_host: str, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "everyone.log"
    env = env_for(docker_host, port, tmp_path, SERVICE_AUTH_MODE="headers", SERVICE_AUTH_HEADERS_SUBJECT="X-User",
                  SERVICE_TRUSTED_PROXIES="0.0.0.0/0")
    with running([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"], env, log) as proc:
        wait_for(lambda: proc.poll() is None and requests.get(f"http://127.0.0.1:{port}/-/health",
                                                              timeout=2).status_code == 200,
                 30, interval=0.2, message="/-/health")
        forged = requests.get(f"http://127.0.0.1:{port}/auth/whoami", headers={"X-User": "anyone"}, timeout=5)
        assert forged.status_code == 200 and forged.json()["subject"] == "anyone"   # what the warning is about
    (warning,) = warnings_of(log, "trusted_proxies_everyone")
    assert "0.0.0.0/0" in warning["msg"] and "any identity" in warning["msg"]
    assert os.path.exists(log)
