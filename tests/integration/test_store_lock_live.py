"""One service per data directory, through real gunicorn on the lab swarm: a second service started on the
same directory ends at once with one clear line (no 15 s wait, no traceback) while the first keeps serving;
the service's own worker restart (SIGHUP: the new worker starts while the old one still stops) waits for
the lock instead and continues the sequence without a gap."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, gunicorn_env, wait_for
from tests.integration.store_support import Server, server_fixture

pytestmark = pytest.mark.integration


server = server_fixture()


def test_a_second_service_on_the_same_data_dir_ends_at_once_with_one_line(
        server: Server, docker_host: str, tmp_path: Path) -> None:
    server.start()
    log_path = tmp_path / "second.log"
    env = gunicorn_env(docker_host, free_port(), SERVICE_DATA_DIR=str(server.state))
    started = time.monotonic()
    with log_path.open("w") as log:
        second = subprocess.Popen([str(REPO / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                  cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        code = second.wait(timeout=20)
    except subprocess.TimeoutExpired:
        second.kill()
        pytest.fail(f"the second service kept running:\n{log_path.read_text()[-3000:]}", pytrace=False)
    took = time.monotonic() - started
    text = log_path.read_text()
    assert code == 3, text[-3000:]                     # gunicorn's "worker failed to boot": no respawn loop
    assert took < 10, f"took {took:.1f} s"
    assert "Traceback" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if "in use by another service" in line]
    assert len(lines) == 1 and f"pid {server.workers()[0]} " in lines[0] and "storage.data_dir" in lines[0], lines
    assert server.ready()["httpStatus"] == 200 and server.ready()["store"]["state"] == "ok"


def test_the_services_own_worker_restart_waits_for_the_lock_and_keeps_the_sequence(server: Server) -> None:
    server.start()
    assert server.proc is not None
    old = server.workers()
    sequence = server.ready()["sequence"]
    server.proc.send_signal(signal.SIGHUP)            # gunicorn: a new worker, the old one stops gracefully
    wait_for(lambda: set(server.workers()) - set(old) and not set(old) & set(server.workers()), 30,
             interval=0.2, message="the old worker replaced")
    wait_for(lambda: server.ready()["httpStatus"] == 200, 30, interval=0.2, message="the new worker ready")
    ready = server.ready()
    assert ready["store"]["state"] == "ok" and ready["sequence"] >= sequence
    records = server.log_records()
    assert not [r for r in records if "in use" in r.get("msg", "")], records[-5:]
    assert not [r for r in records if "not closed in order" in r.get("msg", "")]   # the old one closed in order
    assert len([r for r in records if r.get("msg") == "state restored"]) == 1
