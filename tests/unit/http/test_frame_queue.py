"""The byte-bounded queue of a live stream: the producer waits at the byte cap (backpressure, nothing lost),
the consumer takes everything queued as one chunk, the end is seen after the last frame."""

from __future__ import annotations

import gevent

from app.http.frame_queue import END, FrameQueue
from tests.unit.support import wait_until


def test_a_producer_waits_at_the_byte_cap_and_loses_nothing() -> None:
    queue = FrameQueue(max_bytes=1000)
    line = b"x" * 300
    produced: list[int] = []

    def produce() -> None:
        for index in range(20):
            queue.put(line)
            produced.append(index)
        queue.end()

    producer = gevent.spawn(produce)
    wait_until(lambda: len(produced) >= 4, message="the producer at the cap")
    assert len(produced) == 4 and queue.queued_bytes == 1200   # at most the cap plus one frame
    received = b""
    while (chunk := queue.take(1.0)) is not END:
        assert chunk is not None
        assert len(chunk) <= 1200
        received += chunk
        gevent.sleep(0)   # a yield: the producer refills between two takes
    producer.join(1)
    assert received == line * 20 and len(produced) == 20


def test_take_times_out_with_none_and_ends_with_end() -> None:
    queue = FrameQueue(max_bytes=10)
    assert queue.take(0.01) is None
    queue.put(b"abc")
    queue.end()
    assert queue.take(0.01) == b"abc"
    assert queue.take(0.01) is END


def test_end_releases_a_waiting_producer() -> None:
    queue = FrameQueue(max_bytes=10)
    queue.put(b"0123456789")
    waiting = gevent.spawn(queue.put, b"more")
    gevent.sleep(0.01)   # not a wait: a window in which the put must stay blocked
    assert not waiting.ready()
    queue.end()
    waiting.join(1)
    assert waiting.ready() and queue.queued_bytes == 10
