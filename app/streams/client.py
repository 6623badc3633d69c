"""One event-stream connection's side of the hub: its scope, its bounded queue of frames, its liveness.

The hub only ever calls :meth:`Client.offer` (never blocks: a full queue is replaced by one ``sync``); the
connection's own greenlet calls :meth:`Client.take` and writes what it gets, so a slow socket stalls that
greenlet alone.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gevent.event import Event

from app.acl.evaluator import Access
from app.acl.policy import Grant
from app.auth.identity import Identity
from app.http.peer import client_socket, peer_closed
from app.streams.events import ScopeKey
from app.streams.wire import sync_frame

DEFAULT_QUEUE_FRAMES = 64          # about 6 s of 100 ms batches behind: then sync and start over
# ... or this many bytes behind (big batches): a queue holds at most this plus one frame, the frame being
# shared by every client of its scope group (the hub builds it once).
DEFAULT_QUEUE_BYTES = 1024 * 1024


class Client:
    __slots__ = ("_frames", "_ready", "access", "after_seq", "closed", "environ", "identity", "limit", "max_bytes",
                 "overflows", "queued_bytes", "scopes")

    def __init__(self, scopes: frozenset[ScopeKey], after_seq: int, limit: int = DEFAULT_QUEUE_FRAMES,
                 environ: dict[str, Any] | None = None, access: Access | None = None,
                 identity: Identity | None = None) -> None:
        self.scopes = scopes
        # The requester's ACL (made in its request); None when unrestricted, so the hub's fast path is
        # one identity test. ``identity`` (auth modes only) lets the hub redo it when the policy changes.
        self.access: Access | None = None
        self.set_access(access)
        self.identity = identity
        self.after_seq = after_seq      # changes up to here are not this client's (replayed, or before it)
        self.limit = limit
        self.max_bytes = DEFAULT_QUEUE_BYTES
        self.queued_bytes = 0
        self.overflows = 0
        self.closed = False
        self.environ = environ
        self._frames: deque[bytes] = deque()
        self._ready = Event()

    def set_access(self, access: Access | None) -> None:
        self.access = None if access is None or access.unrestricted else access

    @property
    def grants(self) -> tuple[Grant, ...] | None:
        """What the client's events are filtered by: None when unrestricted."""
        return None if self.access is None else self.access.grants

    @property
    def queued(self) -> int:
        return len(self._frames)

    def offer(self, frame: bytes, seq: int) -> None:
        """Queue a frame; when the queue is full (frames or bytes), drop the backlog and queue a ``sync`` at
        ``seq`` instead. A lone frame always fits: a big batch to a client that keeps up is still delivered."""
        if self.closed:
            return
        if len(self._frames) >= self.limit or (self._frames and self.queued_bytes + len(frame) > self.max_bytes):
            self._frames.clear()
            frame = sync_frame(seq)
            self.queued_bytes = 0
            self.overflows += 1
        self._frames.append(frame)
        self.queued_bytes += len(frame)
        self._ready.set()

    def close(self) -> None:
        """Wake the connection's greenlet so it ends its stream (hub shutdown)."""
        self.closed = True
        self._ready.set()

    def take(self, timeout: float) -> bytes | None:
        """Everything queued, as one chunk; None when nothing came within ``timeout`` (or it was closed)."""
        if not self._frames and not self.closed:
            self._ready.clear()
            self._ready.wait(timeout)
        if not self._frames:
            return None
        chunk = self._frames[0] if len(self._frames) == 1 else b"".join(self._frames)
        self._frames.clear()
        self.queued_bytes = 0
        return chunk

    def socket(self) -> Any:
        """The connection's socket as the server put it in the environ (None outside gunicorn/``shoal``)."""
        return client_socket(self.environ)

    def gone(self) -> bool:
        """Whether the peer closed the connection: a dead idle client is found within one liveness interval
        instead of at the next keepalive write."""
        return peer_closed(self.socket())
