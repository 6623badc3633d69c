"""Whether the store can write, as readiness, ``/-/metrics`` and the log tell it.

One :class:`WriteHealth` per persister. A failing write is logged once when the failure starts (with the
real SQLite error), then as a reminder at most every :data:`REMINDER_INTERVAL` seconds while it lasts, and
once when a write succeeds again: a full disk must not repeat a line every flush. The retry delay doubles
while writes fail (up to :data:`MAX_RETRY_DELAY`), so a rewrite of the whole cache is not attempted twice a
second for as long as the disk stays full.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

log = logging.getLogger(__name__)

REMINDER_INTERVAL = 60.0
MAX_RETRY_DELAY = 30.0


class StoreState(Enum):
    OFF = "off"                 # persistence disabled by configuration
    UNAVAILABLE = "unavailable"  # configured, but the file could not be opened: nothing is written
    OK = "ok"
    FAILING = "failing"         # open, but writes fail (full disk, I/O errors): changes wait in memory


@dataclass(slots=True)
class StoreStatus:
    """What readiness and metrics show (``Persister.status``)."""

    state: StoreState
    pending_changes: int = 0
    pending_bytes: int = 0
    failing_since: float | None = None     # wall clock
    last_error: str | None = None
    write_errors: int = 0
    dropped_changes: int = 0               # dropped past the byte bound: the file is rewritten from the cache

    def document(self) -> dict[str, object]:
        """The ``store`` member of ``/-/ready``."""
        since = None if self.failing_since is None else \
            datetime.fromtimestamp(self.failing_since, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return {"state": self.state.value, "pendingChanges": self.pending_changes,
                "pendingBytes": self.pending_bytes, "failingSince": since,
                "lastError": self.last_error, "writeErrors": self.write_errors,
                "droppedChanges": self.dropped_changes}


def describe_error(exc: BaseException) -> str:
    """``OperationalError: database or disk is full`` (the SQLite error name when Python knows it)."""
    name = getattr(exc, "sqlite_errorname", None)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} ({name})" if name else text


class WriteHealth:
    def __init__(self, path: str) -> None:
        self.path = path
        self.failing_since: float | None = None
        self.last_error: str | None = None
        self.failures = 0              # consecutive failed writes
        self._reminded = 0.0

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def retry_delay(self, interval: float) -> float:
        """The wait before the next attempt: ``interval`` (the flush window), doubled per failure in a row."""
        return min(MAX_RETRY_DELAY, interval * float(2 ** min(max(self.failures - 1, 0), 16)))

    def failed(self, exc: BaseException, changes: int, pending_bytes: int, rewrite: bool) -> None:
        self.failures += 1
        self.last_error = describe_error(exc)
        now = time.monotonic()
        extra = {"path": self.path, "error": self.last_error, "changes": changes, "pending_bytes": pending_bytes,
                 "rewrite": rewrite, "attempts": self.failures}
        if self.failing_since is None:
            self.failing_since = time.time()
            self._reminded = now
            log.error("state store writes fail; changes are kept in memory and retried", extra=extra)
        elif now - self._reminded >= REMINDER_INTERVAL:
            self._reminded = now
            log.warning("state store writes still fail",
                        extra={**extra, "failing_seconds": round(time.time() - self.failing_since, 1)})

    def succeeded(self) -> None:
        if self.failing_since is not None:
            log.info("state store writes recovered", extra={
                "path": self.path, "failed_attempts": self.failures,
                "failing_seconds": round(time.time() - self.failing_since, 1)})
        self.failing_since = None
        self.failures = 0
