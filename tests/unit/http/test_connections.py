"""Head waits of the gunicorn worker (app.http.connections): a crowded worker ends the oldest idle ones,
an uncrowded one leaves them, a wait whose head arrived is never cut, shutdown cuts all."""

from __future__ import annotations

import time

import gevent
import gevent.event

from app.http.connections import HeadWaits
from tests.unit.support import wait_until


def idle(waits: HeadWaits, seconds: float, arrived: gevent.event.Event | None = None) -> gevent.Greenlet:
    """A connection waiting ``seconds`` for a head that comes when ``arrived`` is set (never if None)."""
    def wait() -> str:
        with waits.wait(seconds):
            (arrived or gevent.event.Event()).wait()
            return "request"
        return "closed"
    return gevent.spawn(wait)


def older_than(waits: HeadWaits, count: int, seconds: float) -> bool:
    """``count`` head waits, each begun more than ``seconds`` ago (old enough for the reaper)."""
    now = time.monotonic()
    return len(waits.waiting) == count and all(now - wait.began > seconds for wait in waits.waiting.values())


def test_a_crowded_worker_closes_the_oldest_idle_connections_early() -> None:
    waits = HeadWaits(10, share=0.5, crowded_timeout=0.05)
    connections = [idle(waits, 5.0) for _ in range(6)]
    wait_until(lambda: older_than(waits, 6, 0.05), message="six waits past the crowded timeout")
    assert len(waits.waiting) == 6
    assert waits.reap() == 6
    gevent.joinall(connections, timeout=1)
    assert [c.value for c in connections] == ["closed"] * 6
    assert not waits.waiting and waits.cut_short == 6


def test_an_uncrowded_worker_leaves_idle_connections_their_time() -> None:
    waits = HeadWaits(10, share=0.5, crowded_timeout=0.01)
    connections = [idle(waits, 5.0) for _ in range(4)]
    wait_until(lambda: older_than(waits, 4, 0.01), message="four waits past the crowded timeout")
    assert waits.reap() == 0 and len(waits.waiting) == 4
    waits.cut_all()
    gevent.joinall(connections, timeout=1)
    assert [c.value for c in connections] == ["closed"] * 4


def test_a_head_that_arrived_before_the_cut_is_served() -> None:
    waits = HeadWaits(1, share=1.0, crowded_timeout=0.0)
    arrived = gevent.event.Event()
    connection = idle(waits, 5.0, arrived)
    wait_until(lambda: len(waits.waiting) == 1, message="the head wait registered")
    arrived.set()          # the head comes in, and in the same turn the reaper cuts the wait
    waits.cut_all()
    connection.join(1)
    assert connection.value == "request"


def test_the_ordinary_timeout_still_applies() -> None:
    waits = HeadWaits(100)
    connection = idle(waits, 0.05)
    connection.join(1)
    assert connection.value == "closed" and not waits.waiting
