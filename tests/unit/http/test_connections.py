"""Head waits of the gunicorn worker (app.http.connections): a crowded worker ends the oldest idle ones,
an uncrowded one leaves them, a wait whose head arrived is never cut, shutdown cuts all."""

from __future__ import annotations

import gevent
import gevent.event

from app.http.connections import HeadWaits


def idle(waits: HeadWaits, seconds: float, arrived: gevent.event.Event | None = None) -> gevent.Greenlet:
    """A connection waiting ``seconds`` for a head that comes when ``arrived`` is set (never if None)."""
    def wait() -> str:
        with waits.wait(seconds):
            (arrived or gevent.event.Event()).wait()
            return "request"
        return "closed"
    return gevent.spawn(wait)


def test_a_crowded_worker_closes_the_oldest_idle_connections_early() -> None:
    waits = HeadWaits(10, share=0.5, crowded_timeout=0.05)
    connections = [idle(waits, 5.0) for _ in range(6)]
    gevent.sleep(0.1)
    assert len(waits.waiting) == 6
    assert waits.reap() == 6
    gevent.joinall(connections, timeout=1)
    assert [c.value for c in connections] == ["closed"] * 6
    assert not waits.waiting and waits.cut_short == 6


def test_an_uncrowded_worker_leaves_idle_connections_their_time() -> None:
    waits = HeadWaits(10, share=0.5, crowded_timeout=0.01)
    connections = [idle(waits, 5.0) for _ in range(4)]
    gevent.sleep(0.05)
    assert waits.reap() == 0 and len(waits.waiting) == 4
    waits.cut_all()
    gevent.joinall(connections, timeout=1)
    assert [c.value for c in connections] == ["closed"] * 4


def test_a_head_that_arrived_before_the_cut_is_served() -> None:
    waits = HeadWaits(1, share=1.0, crowded_timeout=0.0)
    arrived = gevent.event.Event()
    connection = idle(waits, 5.0, arrived)
    gevent.sleep(0.01)
    arrived.set()          # the head comes in, and in the same turn the reaper cuts the wait
    waits.cut_all()
    connection.join(1)
    assert connection.value == "request"


def test_the_ordinary_timeout_still_applies() -> None:
    waits = HeadWaits(100)
    connection = idle(waits, 0.05)
    connection.join(1)
    assert connection.value == "closed" and not waits.waiting
