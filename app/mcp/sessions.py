"""Handshake sessions (``Mcp-Session-Id``) and the open notification streams of the agent endpoint.

A session is what ``initialize`` opens on a 2024-11-05 … 2025-11-25 connection: its revision, the caller's
identity (a session is bound to the subject that opened it and never replaces the bearer check), the
resource URIs it subscribed to and the client's capabilities. It is small (a few hundred bytes while idle):
the queue of its GET stream exists only while that stream is open, and its ring of sent events only once a
GET stream was opened (a client that never listens is never written to).

Every session is a notification subscriber (``app.mcp.registry.subscribers``) for its whole life:
``notify`` never blocks. It frames the notification with the session's next event id, keeps it in a ring
bounded in bytes (what a reconnecting GET with ``Last-Event-ID`` gets replayed) and puts it on the open
stream's queue; a queue that is full (a client that stopped reading) ends that stream instead of waiting:
the client reconnects and is replayed from the ring. An id older than the ring is answered with the MCP
"sync": ``notifications/resources/list_changed`` and one ``notifications/resources/updated`` per
subscribed URI, so the client re-reads what it follows.

One greenlet per app (started with the first session or stream) ends sessions idle longer than
``mcp.session_idle_ttl`` and, when the worker drains (SIGTERM) or the runtime stops, ends every open stream
with a ``retry:`` hint, so no stream holds the graceful stop.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import gevent
from flask import Flask

from app.auth.identity import Identity
from app.http.frame_queue import DEFAULT_MAX_BYTES, END, FrameQueue
from app.http.peer import peer_closed
from app.mcp import registry, wire
from app.runtime import runtime_of

log = logging.getLogger(__name__)

RING_BYTES = 32 * 1024          # sent events a session keeps for Last-Event-ID replay
QUEUE_BYTES = DEFAULT_MAX_BYTES  # an open stream's unsent frames at most; over it the stream ends
LIVENESS_INTERVAL = 1.0          # seconds between two checks that an idle stream's client is still there
LIST_CHANGED = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
_EXTENSION_KEY = "shoal.mcp.sessions"


class StreamBusy(Exception):
    """The session's GET stream is already open (a second concurrent one is refused, 409)."""


def new_session_id() -> str:
    """128 random bits as 22 visible ASCII characters (URL-safe base64)."""
    return secrets.token_urlsafe(16)


class Stream:
    """An open SSE answer: the queue its body takes from and how it ends."""

    __slots__ = ("queue", "stopping")

    def __init__(self) -> None:
        self.queue = FrameQueue(QUEUE_BYTES)
        self.stopping = False     # ended by the server (drain, runtime stop, session end), not by the client

    def offer(self, frame: bytes) -> bool:
        """Queue ``frame`` without waiting; a full queue ends the stream (its client stopped reading)."""
        queue = self.queue
        if queue.ended:
            return False
        if queue.queued_bytes + len(frame) > queue.max_bytes:
            queue.end()
            return False
        queue.put(frame)   # below the cap: never waits
        return True

    def end(self) -> None:
        self.stopping = True
        self.queue.end()


class Session:
    """One handshake session; a :class:`app.mcp.registry.Subscriber` (every list change, its URIs)."""

    __slots__ = (
        "__weakref__",
        "_last_id",
        "_ring",
        "_ring_bytes",
        "client_capabilities",
        "client_name",
        "ended",
        "id",
        "identity",
        "initialized",
        "last_used",
        "log_level",
        "stream",
        "subscriptions",
        "version",
    )
    list_changed = True

    def __init__(self, session_id: str, identity: Identity, version: str, client_capabilities: dict[str, Any],
                 client_name: str | None) -> None:
        self.id = session_id
        self.identity = identity
        self.version = version
        self.subscriptions: set[str] = set()
        self.client_capabilities = client_capabilities
        self.client_name = client_name
        self.log_level: str | None = None
        self.initialized = False
        self.ended = False
        self.last_used = time.monotonic()
        self.stream: Stream | None = None          # the open GET stream
        self._ring: deque[tuple[int, bytes]] | None = None   # made when a GET stream first opens
        self._ring_bytes = 0
        self._last_id = 0

    # ------------------------------------------------------------------------------ Subscriber
    def wants(self, uri: str) -> bool:
        return uri in self.subscriptions

    def notify(self, method: str, params: dict[str, Any]) -> bool:
        """Frame, remember, queue; never waits. False: not delivered now (no stream ever opened, or the
        stream's queue was full and the stream ended; the frame stays in the ring for the replay)."""
        if self.ended or self._ring is None:
            return False
        frame = self._record(method, params)
        stream = self.stream
        return stream is not None and stream.offer(frame)

    def _record(self, method: str, params: dict[str, Any]) -> bytes:
        assert self._ring is not None
        self._last_id += 1
        frame = wire.event(wire.encode(wire.notification_body(method, params)), self._last_id)
        self._ring.append((self._last_id, frame))
        self._ring_bytes += len(frame)
        while self._ring_bytes > RING_BYTES and len(self._ring) > 1:
            self._ring_bytes -= len(self._ring.popleft()[1])
        return frame

    # -------------------------------------------------------------------------------- GET stream
    def open_stream(self, last_event_id: str | None) -> tuple[Stream, bytes]:
        """Open the GET stream: its queue and the first bytes (priming event from 2025-11-25 on, then what
        ``Last-Event-ID`` missed, or the sync when the ring no longer holds it). :class:`StreamBusy` if open."""
        if self.stream is not None:
            raise StreamBusy(self.id)
        if self._ring is None:
            self._ring = deque()
        resumed = self._last_id
        missed: list[tuple[int, bytes]] = []
        if last_event_id is not None:
            missed = self._replay(last_event_id)
            resumed = missed[0][0] - 1 if missed else self._last_id
        first = [wire.priming(resumed) if self.version >= "2025-11-25" else wire.RETRY]
        first += [frame for _, frame in missed]
        self.stream = Stream()
        self.last_used = time.monotonic()
        return self.stream, b"".join(first)

    def close_stream(self, stream: Stream) -> None:
        if self.stream is stream:
            self.stream = None
            self.last_used = time.monotonic()

    def _replay(self, last_event_id: str) -> list[tuple[int, bytes]]:
        assert self._ring is not None
        try:
            seen = int(last_event_id)
        except ValueError:
            seen = -1
        if seen == self._last_id:
            return []
        oldest = self._ring[0][0] if self._ring else self._last_id + 1
        if 0 <= seen < self._last_id and oldest <= seen + 1:
            return [(event_id, frame) for event_id, frame in self._ring if event_id > seen]
        return self._sync()

    def _sync(self) -> list[tuple[int, bytes]]:
        """What a client that missed more than the ring holds gets: re-read the list and every subscription."""
        frames = [(self._last_id + 1, self._record(LIST_CHANGED, {}))]
        for uri in sorted(self.subscriptions):
            frames.append((self._last_id + 1, self._record(UPDATED, {"uri": uri})))
        return frames

    def end(self) -> None:
        self.ended = True
        if self.stream is not None:
            self.stream.end()


class Listener:
    """A 2026 ``subscriptions/listen`` stream: a subscriber for the stream's life whose notifications carry
    the listen request's id as ``_meta["io.modelcontextprotocol/subscriptionId"]``."""

    __slots__ = ("__weakref__", "identity", "list_changed", "stream", "subscription_id", "uris")

    def __init__(self, identity: Identity, subscription_id: str | int, list_changed: bool,
                 uris: frozenset[str]) -> None:
        self.identity = identity
        self.subscription_id = subscription_id
        self.list_changed = list_changed
        self.uris = uris
        self.stream = Stream()

    @property
    def meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID_KEY: self.subscription_id}

    def wants(self, uri: str) -> bool:
        return uri in self.uris

    def notify(self, method: str, params: dict[str, Any]) -> bool:
        if method == LIST_CHANGED and not self.list_changed:
            return False
        if method == UPDATED and not self.wants(str(params.get("uri", ""))):
            return False
        stamped = {**params, "_meta": {**params.get("_meta", {}), **self.meta}}
        return self.stream.offer(wire.event(wire.encode(wire.notification_body(method, stamped))))


# ------------------------------------------------------------------------------------------- table
class SessionTable:
    """The sessions and listen streams of one app, their cap, the idle reaper and the stop at drain."""

    def __init__(self, app: Flask) -> None:
        app = getattr(app, "_get_current_object", lambda: app)()   # never keep current_app's proxy
        settings = runtime_of(app).settings
        self.app = app
        self.runtime = runtime_of(app)
        self.max_sessions = settings.mcp_max_sessions
        self.idle_ttl = settings.mcp_session_idle_ttl
        self.keepalive = settings.sse_keepalive
        self.sessions: dict[str, Session] = {}
        self.listeners: set[Listener] = set()
        self.interval = min(15.0, max(0.05, self.idle_ttl / 10))
        self._reaper: gevent.Greenlet | None = None

    @property
    def stopping(self) -> bool:
        return bool(self.runtime.draining.is_set())

    def create(self, identity: Identity, version: str, client_capabilities: dict[str, Any],
               client_name: str | None) -> Session | None:
        """A new session, or None at the cap (after ending the idle ones)."""
        self._ensure_reaper()
        if len(self.sessions) >= self.max_sessions:
            self.reap()
            if len(self.sessions) >= self.max_sessions:
                return None
        session = Session(new_session_id(), identity, version, client_capabilities, client_name)
        self.sessions[session.id] = session
        registry.subscribers(self.app).add(session)
        log.info("mcp session started", extra={"session": session.id[:6], "subject": identity.subject,
                                               "protocol_version": version, "client": client_name})
        return session

    def find(self, session_id: str, identity: Identity) -> Session | None:
        """The live session of this id opened by this subject (another subject's reads as unknown)."""
        session = self.sessions.get(session_id)
        if session is None or session.ended or session.identity.subject != identity.subject:
            return None
        session.last_used = time.monotonic()
        return session

    def end(self, session: Session, reason: str) -> None:
        if self.sessions.pop(session.id, None) is None:
            return
        session.end()
        registry.subscribers(self.app).discard(session)
        log.info("mcp session ended", extra={"session": session.id[:6], "subject": session.identity.subject,
                                             "reason": reason})

    def reap(self, now: float | None = None) -> int:
        """End the sessions unused for ``idle_ttl`` (an open GET stream is use); how many ended."""
        deadline = (time.monotonic() if now is None else now) - self.idle_ttl
        idle = [s for s in self.sessions.values() if s.stream is None and s.last_used <= deadline]
        for session in idle:
            self.end(session, "idle")
        return len(idle)

    def add_listener(self, listener: Listener) -> bool:
        """Register a listen stream; False at the cap (``mcp.max_sessions`` streams)."""
        self._ensure_reaper()
        if len(self.listeners) >= self.max_sessions:
            return False
        self.listeners.add(listener)
        registry.subscribers(self.app).add(listener)
        return True

    def remove_listener(self, listener: Listener) -> None:
        self.listeners.discard(listener)
        registry.subscribers(self.app).discard(listener)

    def end_streams(self) -> int:
        """Worker stop: end every open stream (each says ``retry:`` and, for a listen stream, its final
        result); the sessions stay (a client reconnecting to this worker before it exits finds them)."""
        streams = [s.stream for s in self.sessions.values() if s.stream is not None]
        streams += [listener.stream for listener in self.listeners]
        for stream in streams:
            stream.end()
        return len(streams)

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.dead:
            self._reaper = gevent.spawn(self._run)

    def _run(self) -> None:
        runtime = self.runtime
        while True:
            if runtime.draining.wait(self.interval) or (runtime.started and not runtime.running):
                self.end_streams()
                return
            try:
                self.reap()
            except Exception:   # the reaper must outlive a bug in one round
                log.exception("mcp session reaper failed")


def table_of(app: Flask) -> SessionTable:
    table = app.extensions.get(_EXTENSION_KEY)
    if table is None:
        table = app.extensions[_EXTENSION_KEY] = SessionTable(app)
    assert isinstance(table, SessionTable)
    return table


# ----------------------------------------------------------------------------------------- bodies
def stream_body(stream: Stream, first: bytes, keepalive: float, sock: Any, close: Callable[[], None],
                final: Callable[[], bytes] = lambda: b"") -> Iterator[bytes]:
    """An SSE body: ``first``, then what the queue gets, keepalive comments while idle; ends when the client
    goes away (checked between writes without blocking) or the stream is ended (by the server: ``final()``
    then the ``retry:`` hint; by an overflow: the hint only, the client reconnects). Touches no request or
    app context: the server iterates it in the connection's greenlet."""
    try:
        yield first
        idle_since = time.monotonic()
        while True:
            wait = max(0.0, min(LIVENESS_INTERVAL, idle_since + keepalive - time.monotonic()))
            chunk = stream.queue.take(wait)
            if chunk is None:
                if peer_closed(sock):
                    return
                if time.monotonic() - idle_since >= keepalive:
                    yield wire.KEEPALIVE
                    idle_since = time.monotonic()
                continue
            if chunk is END:   # ended by the server: final words; by an overflow: just the retry hint
                yield (final() if stream.stopping else b"") + wire.CLOSING
                return
            yield chunk
            idle_since = time.monotonic()
    finally:
        close()
