"""Capped live streams fed by a producer greenlet (log tails, the metrics stream): one shared shape.

Why one module: both families need the same things the change-event streams have (a cap answered 429 with
``Retry-After: 5``, headers before the first byte, keepalive comments, noticing a client that went away
between writes, cleanup on every ending) but their events come from an upstream (the engine's log stream,
a Prometheus tick), not from the cache's hub. A producer greenlet reads the upstream and pushes frames into a
queue bounded in bytes (``app.http.frame_queue``: the producer waits while 256 KiB are queued); the response
body (run by the server in the connection's greenlet) takes from it. Every ending (client gone, producer done
or failed, server closing the response, worker shutdown) kills the producer, which must close its upstream
in its own ``finally`` (a ``GreenletExit`` is raised inside it), and frees the slot: the cap never leaks. A
worker shutdown ends each stream with :data:`SHUTDOWN` (a comment and a ``retry:`` hint, no ``id``: a client
resuming with ``Last-Event-ID`` after the restart loses nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
from flask import Flask, Response, request

from app.errors import ProblemError
from app.http.frame_queue import DEFAULT_MAX_BYTES, END, FrameQueue
from app.http.peer import client_socket, peer_closed

log = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
RETRY_AFTER = "5"
LIVENESS_INTERVAL = 1.0              # seconds between two non-blocking checks of an idle connection
DEFAULT_KEEPALIVE = 15.0
QUEUE_BYTES = DEFAULT_MAX_BYTES      # a producer ahead of a slow client by this much waits (backpressure)
KEEPALIVE = b":keepalive\n\n"
# The last bytes of every stream ended by a worker shutdown: a comment (ignored by EventSource) and a
# reconnection delay, so clients come back once the restarted worker listens; no id, no event.
SHUTDOWN = b":shutdown\nretry: 5000\n\n"
HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}   # nginx must not buffer a stream

Emit = Callable[[bytes], None]
Producer = Callable[[Emit], None]


@dataclass(slots=True)
class StreamSlots:
    """The open streams of one family, bounded by ``cap``; at the cap, a 429 problem with ``code``."""

    family: str
    cap: int
    code: str
    open: int = 0
    refused: int = 0
    opened: int = 0
    stopping: bool = False
    _producers: dict[gevent.Greenlet, Any] = field(default_factory=dict)   # producer → client socket

    def acquire(self) -> Slot:
        """No yield between the check and the count: the cap holds under any interleaving."""
        if self.open >= self.cap:
            self.refused += 1
            raise ProblemError(self.code, detail=f"{self.cap} {self.family} streams are open; retry later.",
                               headers={"Retry-After": RETRY_AFTER})
        self.open += 1
        self.opened += 1
        return Slot(self)

    def shutdown(self) -> list[Any]:
        """Worker exit: end every producer (their bodies then end and free their slots); the client sockets,
        whose read side the caller shuts so the server's keep-alive wait on them ends too."""
        self.stopping = True
        sockets = [sock for sock in self._producers.values() if sock is not None]
        gevent.killall(list(self._producers), block=False)
        return sockets


_APP_KEY = "shoal.live"


def stream_slots(app: Flask, family: str, cap: int, code: str) -> StreamSlots:
    """The app's slots of one stream family, made on first use and remembered for :func:`shutdown_live`."""
    families: dict[str, StreamSlots] = app.extensions.setdefault(_APP_KEY, {})
    if family not in families:
        families[family] = StreamSlots(family=family, cap=cap, code=code)
    return families[family]


def shutdown_live(app: Flask) -> list[Any]:
    """Worker exit: end every live stream of every family of ``app`` (``app.streams.response.shutdown_streams``);
    the client sockets of the streams ended."""
    sockets: list[Any] = []
    for slots in list(app.extensions.get(_APP_KEY, {}).values()):
        sockets += slots.shutdown()
    return sockets


def open_live(app: Flask) -> int:
    """Live streams (log tails, metrics streams) open now, every family of ``app``."""
    return sum(slots.open for slots in app.extensions.get(_APP_KEY, {}).values())


class Slot:
    __slots__ = ("_slots", "held")

    def __init__(self, slots: StreamSlots) -> None:
        self._slots = slots
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._slots.open -= 1


def frame(data: bytes, *, event: str | None = None, event_id: str | None = None) -> bytes:
    """One SSE event; ``data`` must hold no raw line break (compact JSON never does)."""
    parts = []
    if event_id is not None:
        parts.append(b"id: " + event_id.encode() + b"\n")
    if event is not None:
        parts.append(b"event: " + event.encode() + b"\n")
    parts.append(b"data: " + data + b"\n\n")
    return b"".join(parts)


def live_response(slots: StreamSlots, producer: Producer, *, keepalive: float = DEFAULT_KEEPALIVE,
                  first: bytes = b"retry: 3000\n\n") -> Response:
    """Take a slot (or 429), start ``producer`` in its own greenlet, stream what it emits.

    ``producer(emit)`` runs until its upstream ends (return) or it is killed; exceptions end the stream
    after being logged (the producer should emit an error event first when the client should know)."""
    if request.method == "HEAD":
        return Response(b"", content_type=MEDIA_TYPE, headers=HEADERS)
    slot = slots.acquire()
    environ = request.environ
    queue = FrameQueue(QUEUE_BYTES)

    def run() -> None:
        try:
            producer(queue.put)
        except gevent.GreenletExit:
            raise
        except Exception:
            log.exception("%s stream producer failed", slots.family)
        finally:
            queue.end()

    worker = gevent.spawn(run)
    slots._producers[worker] = client_socket(environ)

    def close() -> None:
        worker.kill(block=False)
        slots._producers.pop(worker, None)
        slot.release()

    response = Response(_body(queue, slots, environ, keepalive, first, close), content_type=MEDIA_TYPE,
                        headers=HEADERS)
    response.call_on_close(close)
    return response


def _body(queue: FrameQueue, slots: StreamSlots, environ: dict[str, Any], keepalive: float,
          first: bytes, close: Callable[[], None]) -> Iterator[bytes]:
    sock = client_socket(environ)
    try:
        yield first     # sends the headers at once (EventSource fires "open")
        idle_since = time.monotonic()
        while True:
            wait = max(0.0, min(LIVENESS_INTERVAL, idle_since + keepalive - time.monotonic()))
            chunk = queue.take(wait)
            if chunk is None:
                if peer_closed(sock):
                    return
                if time.monotonic() - idle_since >= keepalive:
                    yield KEEPALIVE
                    idle_since = time.monotonic()
                continue
            if chunk is END:
                if slots.stopping:
                    yield SHUTDOWN
                return
            yield chunk
            idle_since = time.monotonic()
    finally:
        close()
