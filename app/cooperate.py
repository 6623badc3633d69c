"""Giving the event loop a turn from long work on the one worker thread.

``gevent.sleep(0)`` only queues the greenlet behind the pending callbacks and may resume it before the loop
polls any socket. ``pause`` waits on a zero-delay timer instead: the loop must run one iteration (with a
non-blocking poll) before the timer fires, so a pending ``accept`` or request read is served meanwhile
(``tests/unit/query/test_filter_budget.py`` checks this with a real socket)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import gevent

T = TypeVar("T")
SLICE_SECONDS = 0.004   # the longest stretch of sliced work between two turns of the loop


def pause() -> None:
    """Park the current greenlet until the event loop has run one iteration (polling I/O)."""
    hub = gevent.get_hub()
    timer = hub.loop.timer(0.0)
    try:
        hub.wait(timer)
    finally:
        timer.close()


def sliced(items: Iterable[T], each: Callable[[T], None], seconds: float = SLICE_SECONDS) -> None:
    """``each`` of every item, in order, pausing whenever ``seconds`` of work have gone by: a long page never
    holds the loop for the whole page."""
    started = time.perf_counter()
    for item in items:
        each(item)
        if time.perf_counter() - started >= seconds:
            pause()
            started = time.perf_counter()
