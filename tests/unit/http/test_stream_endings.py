"""Stream queues bounded in bytes and the final frame at shutdown, for both stream families: the hub's
event streams (``app.streams``) and the producer-fed live streams (``app.http.live``: log tails, metrics)."""

from __future__ import annotations

from collections.abc import Iterator

import gevent
from flask import Flask

from app.cache.store import Cache
from app.http.live import SHUTDOWN, StreamSlots, live_response
from app.streams.client import DEFAULT_QUEUE_BYTES, Client
from app.streams.events import ALL
from app.streams.hub import Hub
from app.streams.response import _body
from app.streams.wire import RETRY
from tests.unit.support import wait_until


def drain(body: Iterator[bytes], into: list[bytes]) -> None:
    for chunk in body:
        into.append(chunk)


# ---------------------------------------------------------------------------------------------- event streams
def test_an_event_client_over_its_byte_cap_gets_sync_instead_of_its_backlog() -> None:
    client = Client(frozenset({ALL}), after_seq=0)
    big = b"x" * (DEFAULT_QUEUE_BYTES // 4)
    for seq in range(4):
        client.offer(big, seq)
    assert client.queued_bytes == 4 * len(big) and client.overflows == 0
    client.offer(b"y" * 100, 5)
    assert client.overflows == 1 and client.queued_bytes < 200
    chunk = client.take(0)
    assert chunk is not None and b"event: sync" in chunk and b"x" not in chunk


def test_a_lone_frame_above_the_cap_is_still_delivered() -> None:
    client = Client(frozenset({ALL}), after_seq=0)
    huge = b"z" * (DEFAULT_QUEUE_BYTES * 2)
    client.offer(huge, 1)
    assert client.overflows == 0 and client.take(0) is huge


def test_an_event_stream_ends_with_the_shutdown_frame() -> None:
    hub = Hub(Cache())
    client = hub.open(frozenset({ALL}))
    chunks: list[bytes] = []
    reader = gevent.spawn(drain, _body(hub, client, iter(()), keepalive=60.0), chunks)
    wait_until(lambda: chunks, message="the stream's first frame")
    hub.shutdown()
    reader.join(2)
    assert reader.dead and chunks[0] == RETRY and chunks[-1] == SHUTDOWN
    assert client not in hub.clients()


# ---------------------------------------------------------------------------------------------- live streams
def test_a_live_producer_ahead_of_its_client_waits_at_the_byte_cap_and_shutdown_ends_the_stream() -> None:
    app = Flask(__name__)
    slots = StreamSlots(family="log", cap=4, code="LOG001")
    frame = b"data: " + b"l" * 16 * 1024 + b"\n\n"
    emitted: list[int] = []

    def producer(emit: object) -> None:
        for index in range(10_000):
            emit(frame)  # type: ignore[operator]
            emitted.append(index)

    with app.test_request_context("/services/x/logs"):
        response = live_response(slots, producer)
    body = iter(response.response)
    assert next(body) == b"retry: 3000\n\n"
    # The client reads nothing more: the producer runs ahead up to the byte cap and stops there (it gives the
    # loop back only by blocking, so once the count is reached it is blocked).
    wait_until(lambda: len(emitted) >= 256 * 1024 // len(frame), message="the producer at the byte cap")
    assert 256 * 1024 // len(frame) <= len(emitted) <= 256 * 1024 // len(frame) + 1
    rest: list[bytes] = []
    reader = gevent.spawn(drain, body, rest)
    wait_until(lambda: rest, message="the reader's first chunk")
    slots.shutdown()
    reader.join(2)
    response.close()
    assert reader.dead and rest[-1] == SHUTDOWN
    assert slots.open == 0
