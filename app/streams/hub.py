"""The hub: every cache change batch in, one frame per batch window and scope group out.

- The cache calls :meth:`Hub.on_changes` synchronously inside its write: it only appends to a list (and
  arms the window's timer), so a write never waits for streams. With no client connected it does nothing.
- When the window (``server.sse.batch_interval``) ends, :meth:`Hub.flush` runs in its own greenlet: each
  change's ``data`` JSON is built at most once (only if some client's scope wants it), clients with the same
  scope set share one frame, and each client gets it through :meth:`Client.offer`, which never blocks. The
  flush yields to the hub every :data:`YIELD_EVERY` events, so a burst (a full sync) does not stall the
  worker; changes that arrive meanwhile wait for the next window.
- A client opened with a restricted :class:`~app.acl.evaluator.Access` gets only the events it may read
  (``app.streams.acl``), at fan-out and at replay; clients with the same scopes and the same grants still
  share one frame. Unrestricted clients (no policy, mode ``none``) skip the check entirely. When the policy
  is swapped (hot reload), every client's access is redone from its identity at once (the policy source
  calls :meth:`Hub.policy_swapped`; each flush checks too), and a client whose grants changed gets ``sync``,
  so a revoked reader refetches its narrower view and a restored one the changes it missed.
- Nothing here writes to a socket: the connection greenlets do (``app.streams.response``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gevent

from app.acl.evaluator import Access, access_for
from app.acl.policy import Policy
from app.auth.identity import Identity
from app.cache.entries import Entry
from app.cache.history import Change
from app.cache.store import Cache
from app.cooperate import pause
from app.resources import ResourceKind
from app.streams import events
from app.streams.acl import hidden_references, may_read
from app.streams.client import DEFAULT_QUEUE_FRAMES, Client
from app.streams.events import Built, ScopeKey, Variant
from app.streams.wire import batch_frame, encode_json, sync_frame

log = logging.getLogger(__name__)

MAX_CLIENTS = 256
YIELD_EVERY = 200          # events built between two cooperative yields
REPLAY_CHUNK = 500         # events per replayed batch frame


class StreamCapReached(Exception):
    """All :data:`MAX_CLIENTS` event streams are open (answered 429 SSE001)."""


@dataclass(slots=True)
class HubStats:
    opened: int = 0
    refused: int = 0
    flushes: int = 0
    frames: int = 0
    events_built: int = 0
    overflows: int = 0
    access_resyncs: int = 0      # sync frames sent because a policy reload changed a client's grants
    last_flush_ms: float = 0.0


class Hub:
    def __init__(self, cache: Cache, *, batch_interval: float = 0.1, base_path: str = "",
                 max_clients: int = MAX_CLIENTS, queue_frames: int = DEFAULT_QUEUE_FRAMES) -> None:
        self.cache = cache
        self.batch_interval = batch_interval
        self.base_path = base_path
        self.max_clients = max_clients
        self.queue_frames = queue_frames
        self.stats = HubStats()
        self._clients: set[Client] = set()
        self._pending: list[Change] = []
        self._timer: gevent.Greenlet | None = None
        self._flushing = False
        self._unsubscribe: Callable[[], None] | None = cache.subscribe(self.on_changes)
        self._policy_of: Callable[[], Policy | None] | None = None
        self._policy: Policy | None = None

    def follow_policy(self, policy_of: Callable[[], Policy | None]) -> None:
        """Auth modes: the current policy, asked at each flush (a swap re-evaluates the clients)."""
        self._policy_of = policy_of
        self._policy = policy_of()

    @property
    def follows_policy(self) -> bool:
        return self._policy_of is not None

    def policy_swapped(self) -> None:
        """The policy source's listener (``PolicySource.subscribe``): follow a reload at once, not at the
        next change."""
        self._refresh_access()

    def _refresh_access(self) -> None:
        """Redo every client's access from its identity when the policy changed; a client whose grants
        changed gets ``sync`` (revoked: its view must shrink; restored: the changes it was not shown since
        are refetched). Grants that stay equal send nothing."""
        if self._policy_of is None:
            return
        policy = self._policy_of()
        if policy is self._policy:
            return
        self._policy = policy
        seq = self.cache.history.last_seq
        for client in list(self._clients):
            if client.identity is None:
                continue
            before = client.grants
            client.set_access(access_for(client.identity, policy, auth_enabled=True))
            if client.grants != before:
                client.offer(sync_frame(seq), seq)
                self.stats.access_resyncs += 1

    @property
    def open_streams(self) -> int:
        return len(self._clients)

    def clients(self) -> list[Client]:
        return list(self._clients)

    def wants(self, scope: ScopeKey) -> bool:
        return any(scope in client.scopes for client in self._clients)

    def broadcast(self, scope: ScopeKey, frame: bytes, seq: int) -> None:
        """Offer a ready frame to every client of ``scope`` (events that are not cache changes)."""
        for client in list(self._clients):
            if scope in client.scopes:
                client.offer(frame, seq)

    # ------------------------------------------------------------------ clients
    def open(self, scopes: frozenset[ScopeKey], environ: dict[str, object] | None = None,
             access: Access | None = None, identity: Identity | None = None) -> Client:
        """Register a client from the current sequence on; no yield between the cap check and the add.
        ``access``: what the requester may read (None or unrestricted: everything); ``identity``: whose it
        is (auth modes), to redo it when the policy changes."""
        if len(self._clients) >= self.max_clients:
            self.stats.refused += 1
            raise StreamCapReached
        client = Client(scopes, self.cache.history.last_seq, self.queue_frames, environ, access, identity)
        self._clients.add(client)
        self.stats.opened += 1
        return client

    def close(self, client: Client) -> None:
        """Idempotent: called by the stream's ``finally`` and by the response's close."""
        client.closed = True
        self.stats.overflows += client.overflows
        client.overflows = 0
        self._clients.discard(client)

    def shutdown(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for client in list(self._clients):
            client.close()
        if self._timer is not None:
            self._timer.kill(block=False)
            self._timer = None

    # ------------------------------------------------------------------ changes in
    def on_changes(self, changes: list[Change]) -> None:
        """Cache listener: called inside the cache's write, so it must stay O(1)-ish and do no I/O."""
        if not self._clients:
            return
        self._pending.extend(changes)
        if self._timer is None:
            self._timer = gevent.spawn_later(self.batch_interval, self._flush_window)

    def _flush_window(self) -> None:
        self._timer = None
        if self._flushing:   # the previous window's flush still runs (it yields): keep the order per client
            self._timer = gevent.spawn_later(self.batch_interval, self._flush_window)
            return
        self._flushing = True
        try:
            self.flush()
        except Exception:  # a bug here must not end the stream machinery: log it, clients resync
            log.exception("SSE flush failed; clients get sync")
            for client in list(self._clients):
                client.offer(sync_frame(self.cache.history.last_seq), self.cache.history.last_seq)
        finally:
            self._flushing = False

    def flush(self) -> None:
        """Deliver the pending changes: one frame per (scope set) group, offered to each of its clients."""
        pending, self._pending = self._pending, []
        if not pending or not self._clients:
            return
        self._refresh_access()
        started = time.perf_counter()
        counter = _Counter()
        built = []
        for change in pending:
            built.append(events.built(self.cache, change))
            counter.tick(light=True)
        groups: dict[tuple[frozenset[ScopeKey], object], list[Client]] = {}
        for client in self._clients:   # same scopes and same grants: same events, one shared frame
            access = client.access
            groups.setdefault((client.scopes, None if access is None else access.grants), []).append(client)
        for (scopes, grants), clients in groups.items():
            if grants is None:
                wanted = [b for b in built if b.keys & scopes]
            else:
                wanted = self._readable([b for b in built if b.keys & scopes], clients[0].access, counter)
            if not wanted:
                continue
            shared: bytes | None = None
            for client in clients:
                if client.grants != grants:   # a reload changed it while this flush yielded: it got sync
                    continue
                mine = wanted if wanted[0].change.seq > client.after_seq \
                    else [b for b in wanted if b.change.seq > client.after_seq]
                if not mine:
                    continue
                if mine is wanted:
                    if shared is None:
                        shared = self._frame(mine, counter, client.access)
                    frame = shared
                else:
                    frame = self._frame(mine, counter, client.access)
                client.offer(frame, mine[-1].change.seq)
                self.stats.frames += 1
        self.stats.flushes += 1
        self.stats.last_flush_ms = (time.perf_counter() - started) * 1000

    def _readable(self, items: list[Built], access: Access | None, counter: _Counter) -> list[Built]:
        kept = []
        for item in items:
            if may_read(access, self.cache, item):
                kept.append(item)
            counter.tick(light=True)
        return kept

    def _frame(self, wanted: list[Built], counter: _Counter, access: Access | None = None) -> bytes:
        """One frame of ``wanted``; each event's data is built once and shared, except for a restricted
        reader who may not see what a task's derived fields name (built for that frame alone)."""
        parts: list[tuple[str, bytes]] = []
        for item in wanted:
            variant = None if access is None else hidden_references(access, self.cache, item)
            if variant is not None:
                parts.append((item.change.kind.value, self._narrowed(item, variant, counter)))
                continue
            if item.data is None:
                item.data = encode_json(events.event_data(self.cache, item.change, item.entry, self.base_path))
                self.stats.events_built += 1
                counter.tick()
            parts.append((item.change.kind.value, item.data))
        return batch_frame(wanted[-1].change.seq, parts)

    def _narrowed(self, item: Built, variant: Variant, counter: _Counter) -> bytes:
        """An event's data with the references of ``variant`` blanked (built once per variant)."""
        variants = item.narrowed if item.narrowed is not None else {}
        item.narrowed = variants
        data = variants.get(variant)
        if data is None:
            visible = functools.partial(_variant_visible, variant)
            data = variants[variant] = encode_json(events.event_data(self.cache, item.change, item.entry,
                                                                     self.base_path, visible))
            counter.tick()
        return data

    # ------------------------------------------------------------------ replay
    def replay(self, client: Client, last_event_id: str | None, replayable: bool = True) -> Iterator[bytes]:
        """Frames for a reconnecting client: the missed changes of its scope after ``last_event_id`` (up to
        the sequence it was registered at), or one ``sync`` when they are not all in the history ring or
        the id is not one this service gave."""
        if last_event_id is None:
            return iter(())
        seq = parse_event_id(last_event_id) if replayable else None
        missed = None if seq is None else self.cache.history.since(seq)
        if missed is None:
            return iter((sync_frame(client.after_seq),))
        upto = client.after_seq
        return self._replay_frames([c for c in missed if c.seq <= upto], client.scopes, client.access)

    def _replay_frames(self, changes: list[Change], scopes: frozenset[ScopeKey],
                       access: Access | None = None) -> Iterator[bytes]:
        counter = _Counter()
        chunk: list[Built] = []
        for change in changes:
            item = events.built(self.cache, change)
            counter.tick(light=True)
            if item.keys & scopes and may_read(access, self.cache, item):
                chunk.append(item)
            if len(chunk) >= REPLAY_CHUNK:
                yield self._frame(chunk, counter, access)
                chunk = []
        if chunk:
            yield self._frame(chunk, counter, access)


def _variant_visible(variant: Variant, entry: Entry) -> bool:
    if entry.kind is ResourceKind.SERVICE:
        return variant[0]
    if entry.kind is ResourceKind.NODE:
        return variant[1]
    return (entry.kind.value, entry.id) not in variant[2]


class _Counter:
    """Yield to the gevent hub every :data:`YIELD_EVERY` events built."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def tick(self, light: bool = False) -> None:
        """One unit of work; routing a change (``light``) counts a tenth of building its JSON."""
        self.count += 1 if light else 10
        if self.count >= YIELD_EVERY * 10:
            self.count = 0
            pause()   # a loop turn that polls sockets (app.cooperate)


def parse_event_id(value: str) -> int | None:
    """A sequence number this service could have sent: ASCII digits only, at most 18 of them."""
    value = value.strip()
    if not value or len(value) > 18 or not value.isascii() or not value.isdigit():
        return None
    return int(value)

