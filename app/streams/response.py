"""The HTTP side of a stream: cap check, headers before the first byte, replay, queue, keepalive, cleanup.

The body is a generator the WSGI server iterates in the connection's own greenlet; it touches no request
or app context (everything it needs is passed in). Its four endings: the client goes away (a failed write,
or the liveness check finding EOF between writes), the hub shuts down, the server closes the response, or
the cap refused it before it started. Every one unregisters the client (``finally`` and ``call_on_close``,
both idempotent), so the cap never leaks: an idle dead client is found within :data:`LIVENESS_INTERVAL`.
A hub shutdown (worker stop) ends the body with ``app.http.live.SHUTDOWN``: a comment and a ``retry:`` hint,
no ``id``, so the client's ``Last-Event-ID`` still names the last event it got and it resumes exactly.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import gevent
from flask import Flask, Response, current_app, request
from gevent import monkey

from app.cache.store import Cache
from app.config import Settings
from app.errors import ProblemError
from app.http.acl import current_access
from app.http.auth import current_identity
from app.http.live import SHUTDOWN, open_live, shutdown_live
from app.runtime import runtime_of
from app.streams import findings
from app.streams.client import Client
from app.streams.events import ScopeKey
from app.streams.hub import Hub, StreamCapReached
from app.streams.wire import KEEPALIVE, RETRY

_plain_socket = monkey.get_original("socket", "socket")
MEDIA_TYPE = "text/event-stream"
LIVENESS_INTERVAL = 1.0        # seconds between two non-blocking checks of an idle connection
RETRY_AFTER = "5"
_EXTENSION_KEY = "shoal.streams"
# No Cache-Control, ETag or Last-Modified on streams (interface "Response headers"); nginx must not buffer.
STREAM_HEADERS = {"X-Accel-Buffering": "no"}


def init_streams(app: Flask, cache: Cache, settings: Settings) -> Hub:
    """Create the app's hub on its cache (a listener only: no greenlet runs until a change meets a client)."""
    hub = Hub(cache, batch_interval=settings.sse_batch_interval, base_path=settings.base_path)
    app.extensions[_EXTENSION_KEY] = (hub, settings.sse_keepalive)
    if settings.auth_mode != "none":   # open streams follow a reloaded policy
        policy_source = runtime_of(app).policy
        hub.follow_policy(lambda: policy_source.policy)
        policy_source.subscribe(hub.policy_swapped)   # a reload resyncs the streams whose grants changed
    findings.attach(hub, runtime_of(app).recommendations)
    return hub


def shutdown_streams(app: Flask, settle: float = 0.2) -> None:
    """End every open stream (worker shutdown): a graceful stop otherwise waits its whole timeout for them.

    Each body ends cleanly (the server writes the last chunk); then the read side of its connection is shut,
    so the server's keep-alive wait for a next request ends at once instead of after its keep-alive time."""
    entry = app.extensions.get(_EXTENSION_KEY)
    if not entry:
        return
    hub: Hub = entry[0]
    sockets = [client.socket() for client in hub.clients()]
    hub.shutdown()
    sockets += shutdown_live(app)   # log tails and metrics streams: their producers end, so do their bodies
    gevent.sleep(settle)
    for sock in sockets:
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                _shut_reading(sock.fileno())


def _shut_reading(fd: int) -> None:
    """``shutdown(SHUT_RD)`` through a duplicate descriptor with the unpatched socket class: the server's
    pending read then sees EOF and ends quietly (gevent's own ``shutdown`` cancels that read, which the
    server logs as an error)."""
    duplicate = _plain_socket(fileno=os.dup(fd))
    try:
        duplicate.shutdown(socket.SHUT_RD)
    finally:
        duplicate.close()


def open_streams(app: Flask) -> int:
    """Streams open now, event streams plus live log and metrics streams (the ``shoal_open_streams`` gauge)."""
    entry = app.extensions.get(_EXTENSION_KEY)
    return (entry[0].open_streams if entry else 0) + open_live(app)


def hub_of(app: Flask) -> Hub:
    hub, _ = app.extensions[_EXTENSION_KEY]
    assert isinstance(hub, Hub)
    return hub


def last_event_id() -> str | None:
    """``Last-Event-ID`` (what EventSource sends on reconnect), else ``?lastEventId=`` for clients that
    cannot set headers; an empty value is no value."""
    value = request.headers.get("Last-Event-ID")
    if value is None or value == "":
        value = request.args.get("lastEventId")
    return value or None


def stream_response(scopes: frozenset[ScopeKey], *, replayable: bool = True) -> Response:
    """Open a stream of the events carrying any of ``scopes`` that the caller may read (its ACL is taken
    here, in the request, and kept by the hub's client); 429 SSE001 with Retry-After at the cap."""
    hub, keepalive = current_app.extensions[_EXTENSION_KEY]
    if request.method == "HEAD":   # headers only: no client registered, nothing to clean up
        return Response(b"", content_type=MEDIA_TYPE, headers=STREAM_HEADERS)
    try:
        identity = current_identity() if hub.follows_policy else None
        client = hub.open(scopes, request.environ, current_access(), identity)
    except StreamCapReached:
        raise ProblemError("SSE001", detail=f"{hub.max_clients} event streams are open; retry later.",
                           headers={"Retry-After": RETRY_AFTER}) from None
    replay = hub.replay(client, last_event_id(), replayable)
    response = Response(_body(hub, client, replay, keepalive), content_type=MEDIA_TYPE, headers=STREAM_HEADERS)
    response.call_on_close(lambda: hub.close(client))
    return response


def _body(hub: Hub, client: Client, replay: Iterator[bytes], keepalive: float) -> Iterator[bytes]:
    try:
        yield RETRY     # the first chunk sends the headers at once (EventSource fires "open")
        yield from replay
        idle_since = time.monotonic()
        while not client.closed:
            wait = max(0.0, min(LIVENESS_INTERVAL, idle_since + keepalive - time.monotonic()))
            chunk = client.take(wait)
            if chunk:
                yield chunk
                idle_since = time.monotonic()
                continue
            if client.closed:
                break
            if client.gone():
                return
            if time.monotonic() - idle_since >= keepalive:
                yield KEEPALIVE
                idle_since = time.monotonic()
        yield SHUTDOWN   # only the hub's shutdown closes a client while its body runs
    finally:
        hub.close(client)
