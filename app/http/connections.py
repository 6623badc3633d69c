"""The connections of the gunicorn worker that wait for a request head, and when they are cut short.

Why: gunicorn's gevent worker reads every request head (the first and each keep-alive one) under one
timeout, ``keepalive`` (5 s), and serves at most ``worker_connections`` connections. 2,000 clients that open
a connection and never finish a request line hold every slot: a new client waited the full 5 s. Here every
head wait is registered; when the waits fill :data:`CROWDED_SHARE` of the slots, a reaper ends those older
than :data:`CROWDED_HEAD_TIMEOUT` (an idle keep-alive connection or a half-open one: nothing is lost, the
request had not started), so a new client waits about that long. At worker shutdown every head wait ends at
once: an idle keep-alive client no longer holds the graceful stop for its keep-alive time.

A wait is ended by expiring its own ``gevent.Timeout`` (made with ``exception=False``) early, from the hub
as its timer would, and only while it is still pending: gunicorn's loop then sees no request and closes the
connection, exactly as when the timeout fires; a head that arrived meanwhile is served normally.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent

log = logging.getLogger(__name__)

CROWDED_SHARE = 0.9           # head waits holding this share of worker_connections: the worker is crowded
CROWDED_HEAD_TIMEOUT = 0.5    # seconds a head wait may last while crowded
REAP_INTERVAL = 0.25


class HeadWait(gevent.Timeout):  # type: ignore[misc]  # gevent is untyped
    """``gevent.Timeout(seconds, False)`` that registers its greenlet while it waits for a request head."""

    def __init__(self, waits: HeadWaits, seconds: float) -> None:
        super().__init__(seconds, False)
        self._waits = waits
        self.began = 0.0
        self.greenlet: Any = None

    def __enter__(self) -> HeadWait:
        super().__enter__()
        self.began = time.monotonic()
        self.greenlet = gevent.getcurrent()
        self._waits.waiting[self.greenlet] = self
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> Any:
        self._waits.waiting.pop(self.greenlet, None)
        return super().__exit__(kind, value, traceback)

    def cut(self) -> None:
        """End this wait now, as if its timeout had fired (the connection closes quietly)."""
        self._waits.waiting.pop(self.greenlet, None)
        gevent.get_hub().loop.run_callback(self._expire_now)

    def _expire_now(self) -> None:
        # In the hub, as a timer's expiry: a wait that ended meanwhile (its head arrived) is left alone.
        if self.pending:
            self.timer.stop()
            self.greenlet.throw(self)


class HeadWaits:
    """Every connection of the worker now waiting for a request head (``HeadWait``s by greenlet)."""

    def __init__(self, connections: int, *, share: float = CROWDED_SHARE,
                 crowded_timeout: float = CROWDED_HEAD_TIMEOUT) -> None:
        self.waiting: dict[Any, HeadWait] = {}
        self.crowd = max(1, int(connections * share))
        self.crowded_timeout = crowded_timeout
        self.cut_short = 0

    def wait(self, seconds: float) -> HeadWait:
        return HeadWait(self, seconds)

    def reap(self) -> int:
        """While crowded, end the waits older than ``crowded_timeout``; how many were ended."""
        if len(self.waiting) < self.crowd:
            return 0
        oldest = time.monotonic() - self.crowded_timeout
        stale = [wait for wait in self.waiting.values() if wait.began <= oldest]
        for wait in stale:
            wait.cut()
        self.cut_short += len(stale)
        if stale:
            log.warning("crowded with connections that send no request; idle ones closed",
                        extra={"closed": len(stale), "waiting": len(self.waiting)})
        return len(stale)

    def cut_all(self) -> int:
        """Worker shutdown: end every head wait (idle keep-alive and half-open connections)."""
        waits = list(self.waiting.values())
        for wait in waits:
            wait.cut()
        return len(waits)

    def run_reaper(self, alive: Any) -> None:
        """Reap every :data:`REAP_INTERVAL` while ``alive()``: O(1) per round unless crowded."""
        while alive():
            gevent.sleep(REAP_INTERVAL)
            self.reap()
