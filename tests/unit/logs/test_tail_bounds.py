"""A live log tail whose client does not read: the tail producer (``app.logs.tailing``) is held at the
stream's byte cap (``app.http.live.QUEUE_BYTES``), so a service writing big lines costs at most that much per
client, and the engine stream is not read further meanwhile; everything arrives once the client reads."""

from __future__ import annotations

from collections.abc import Iterator

import gevent
from flask import Flask

from app.cache.store import Cache
from app.http.live import QUEUE_BYTES, StreamSlots, live_response
from app.logs.labels import Labeller
from app.logs.lines import LogLine
from app.logs.params import LogQuery
from app.logs.tailing import tail_producer
from tests.unit.support import wait_until

LINE = "x" * 16 * 1024          # what the engine makes of a 1 MB line: 16 KiB pieces
LINES = 200


class BigLineReader:
    """A follow stream of ``LINES`` 16 KiB lines, one per batch; counts how far it was read."""

    def __init__(self) -> None:
        self.read = 0
        self.closed = False

    def batches(self) -> Iterator[list[LogLine]]:
        for index in range(LINES):
            self.read += 1
            yield [LogLine(ns=1_700_000_000_000_000_000 + index, stream="stdout", message=LINE)]

    def close(self) -> None:
        self.closed = True


def test_a_tail_nobody_reads_stops_reading_the_engine_at_the_byte_cap_and_loses_nothing() -> None:
    reader = BigLineReader()
    producer = tail_producer([reader], LogQuery(), Labeller(Cache()))  # type: ignore[list-item]
    slots = StreamSlots(family="log", cap=2, code="LOG001")
    with Flask(__name__).test_request_context("/services/s/logs"):
        response = live_response(slots, producer)
    body = iter(response.response)
    next(body)                                   # retry: 3000, then the client stops reading
    gevent.sleep(0.1)   # not a wait: a window in which the producer must not read past the byte cap
    per_event = len(LINE) + 100
    assert reader.read <= QUEUE_BYTES // per_event + 2, reader.read
    received = b""
    for chunk in body:                           # the client reads again: everything comes, in order
        received += chunk
        if received.count(b"\nid: ") + received.startswith(b"id: ") >= LINES:
            break
    response.close()
    assert received.count(LINE.encode()) == LINES and reader.read == LINES
    wait_until(lambda: reader.closed and slots.open == 0, message="the reader closed and the slot freed")
