"""The data directory's lock: another service is refused at once with one line; a leftover of our own
service (a sibling worker, an orphan of a killed master) is waited for; the Runtime ends the process."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import gevent
import pytest

from app.store.lock import DataDirInUse, Holder, read_holder, take_lock


def _hold(path: Path, pid: int, parent: int) -> IO[bytes]:
    """A lock held through another open file description, with the given holder record."""
    lock = open(path, "a+b")  # noqa: SIM115
    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock.truncate(0)
    lock.write(json.dumps({"pid": pid, "parent": parent, "started": time.time()}).encode())
    lock.flush()
    return lock


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_holder_writes_who_it_is(tmp_path: Path) -> None:
    lock = take_lock(str(tmp_path / "x.lock"), 1.0, time.sleep)
    assert read_holder(str(tmp_path / "x.lock")) == Holder(os.getpid(), os.getppid(),
                                                           read_holder(str(tmp_path / "x.lock")).started)  # type: ignore[union-attr]
    lock.close()


def test_another_service_is_refused_at_once_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])   # a live holder, killed below
    try:
        held = _hold(path, other.pid, other.pid)   # a live parent that is not ours: another service
        started = time.monotonic()
        with pytest.raises(DataDirInUse, match=f"another service: pid {other.pid}"):
            take_lock(str(path), 10.0, time.sleep)
        assert time.monotonic() - started < 1.0
        held.close()
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("parent", ["ours", "dead"])
def test_a_leftover_of_our_own_service_is_waited_for(tmp_path: Path, parent: str) -> None:
    path = tmp_path / "x.lock"
    held = _hold(path, 12345, os.getppid() if parent == "ours" else _dead_pid())
    gevent.spawn_later(0.3, held.close)   # the leftover finishes its stop
    started = time.monotonic()
    lock = take_lock(str(path), 5.0, gevent.sleep)
    assert 0.2 < time.monotonic() - started < 3.0
    assert read_holder(str(path)).pid == os.getpid()  # type: ignore[union-attr]
    lock.close()


def test_a_leftover_that_does_not_let_go_is_refused_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    held = _hold(path, 12345, os.getppid())
    with pytest.raises(DataDirInUse, match="still held"):
        take_lock(str(path), 0.3, time.sleep)
    held.close()


def test_a_holder_that_never_says_who_it_is_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    held = open(path, "a+b")  # noqa: SIM115
    fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    started = time.monotonic()
    with pytest.raises(DataDirInUse, match="another process"):
        take_lock(str(path), 10.0, time.sleep)
    assert time.monotonic() - started < 2.0
    held.close()


def test_the_runtime_ends_the_process_with_one_line_when_another_service_holds_the_dir(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from app.runtime import EXIT_DATA_DIR_IN_USE
    from tests.fakes import FakeEngine
    from tests.unit.objects import cluster
    from tests.unit.support import build_harness

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])   # a live holder, killed below
    try:
        held = _hold(tmp_path / "shoal.db.lock", other.pid, other.pid)
        harness = build_harness(FakeEngine(cluster()), data_dir=str(tmp_path))
        with caplog.at_level(logging.CRITICAL, logger="app.runtime"), pytest.raises(SystemExit) as ended:
            harness.start()
        assert ended.value.code == EXIT_DATA_DIR_IN_USE
        lines = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(lines) == 1 and "in use by another service" in lines[0].getMessage()
        assert lines[0].exc_info is None
        held.close()
    finally:
        other.kill()
        other.wait()
