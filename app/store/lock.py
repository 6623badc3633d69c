"""The store file's lock: one process writes a data directory at a time, and a second service fails at once.

An exclusive ``flock`` on ``<file>.lock``; the holder writes who it is into the file (pid, parent pid, start
time). A process that finds the lock taken reads that record to decide:

- the holder's parent is ours (gunicorn restarting its worker: the old one still flushes) or is gone (an
  orphaned worker of a killed master, shutting down): wait for it, up to ``timeout``;
- otherwise another *service* uses the directory: :class:`DataDirInUse` at once, with one line naming it
  (the caller ends the process: two services would interleave numbers in one file).

Blocking; runs on the store thread (``app.store.persister``).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO


class DataDirInUse(Exception):
    """Another service holds the data directory's lock (the message names it)."""


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    parent: int
    started: float

    @property
    def is_leftover(self) -> bool:
        """A process of our own service that is on its way out: a sibling worker of our master (a restart),
        or a worker whose master is gone (killed: the orphan notices within a second and stops)."""
        return (self.parent == os.getppid() and self.parent != 1) or not _alive(self.parent)

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))
        return f"pid {self.pid} (parent {self.parent}, started {started})"


def _alive(pid: int) -> bool:
    if pid <= 1:
        return pid == 1
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(path: str) -> Holder | None:
    """The record the holder wrote; None while it is being written or for a file without one."""
    try:
        with open(path, "rb") as file:
            record = json.loads(file.read(4096) or b"null")
        return Holder(int(record["pid"]), int(record["parent"]), float(record["started"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def take_lock(path: str, timeout: float, sleep: Callable[[float], None]) -> IO[bytes]:
    """Take the lock, waiting only for a leftover of our own service; returns the open file (closing it
    releases the lock).

    :raises DataDirInUse: another service holds it, or a leftover did not let go within ``timeout``.
    """
    lock = open(path, "a+b")  # noqa: SIM115 (held open until stop)
    deadline = time.monotonic() + timeout
    unknown_since: float | None = None
    try:
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            holder = read_holder(path)
            now = time.monotonic()
            if holder is not None and not holder.is_leftover:
                raise DataDirInUse(f"the data directory is in use by another service: {holder.describe()} "
                                   f"holds {path}")
            if holder is None:   # being written, or an older version's lock: give it a second to say who
                unknown_since = now if unknown_since is None else unknown_since
                if now - unknown_since > 1.0:
                    raise DataDirInUse(f"the data directory is in use by another process (it holds {path})")
            if now >= deadline:
                raise DataDirInUse(f"{path} is still held by {holder.describe() if holder else 'another process'} "
                                   f"after {timeout:g} s")
            sleep(0.1)
        lock.seek(0)
        lock.truncate()
        lock.write(json.dumps({"pid": os.getpid(), "parent": os.getppid(), "started": time.time()}).encode())
        lock.flush()
    except BaseException:
        lock.close()
        raise
    return lock
