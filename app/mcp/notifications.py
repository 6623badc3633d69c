"""Resource notifications to agents: cache changes → ``notifications/resources/updated`` and
``notifications/resources/list_changed`` to the subscribers (``registry.subscribers``) that want them and may
read what changed.

- The cache and the recommendation engine call the listeners synchronously inside their writes: they only
  append to a pending list (bounded: past :data:`MAX_PENDING` changes the list is dropped and the next pass
  treats every cached object as changed) and wake one greenlet, which does the fan-out.
- What a change touches: the detail URI of its own object (``service://<plural>/<id>``, and the name form
  ``service://<plural>/<name>`` for a subscriber that subscribed by name). The cache already records a
  ``ref_changed`` change for every object whose REST representation embeds what changed (a service when
  one of its tasks changes state, a stack when a member changes, a config when a service starts using it),
  so "the cached entry changed" is exactly "its REST body changed": nothing else is derived here.
  ``service://cluster`` is touched by any create, update or remove (its counts), ``service://history`` by any
  change it lists (create, update, remove) the subscriber may read, ``service://recommendations`` by any
  finding that appeared, changed or disappeared that it may read. A create or a remove sends
  ``list_changed`` to subscribers that asked for it and may read the object.
- ACL: each subscriber's identity gets an :class:`~app.acl.evaluator.Access` from the current policy (as the
  SSE hub redoes its clients' access), memoised per identity until the policy object changes; a change is
  judged by the keys of the changed object (``app.http.acl_read.change_keys``: its current state, or its
  recorded one once removed), so a hidden object's change never reaches that agent.
- Coalescing: at most one notification per (subscriber, URI) per :data:`WINDOW` (``list_changed`` counts as
  one URI); the first goes out at once, later ones within the window are sent once at its end (if the
  subscriber is still there and still wants the URI). Log URIs use :data:`LOG_WINDOW`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import gevent
from flask import Flask
from gevent.event import Event

from app.acl.evaluator import Access, access_for
from app.auth.identity import Identity
from app.cache.entries import Entry
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.cooperate import pause
from app.http.acl_read import change_keys
from app.mcp import registry, uris
from app.recommendations.store import FindingChange
from app.resources import ResourceKind
from app.runtime import runtime_of
from app.streams.acl import may_read_finding

log = logging.getLogger(__name__)

UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"
WINDOW = 0.1              # seconds: at most one notification per (subscriber, URI) per window
LOG_WINDOW = 0.25         # the same for log URIs
MAX_PENDING = 50_000      # changes waiting for the fan-out; beyond, everything counts as changed
YIELD_EVERY = 2_000       # wants()/ACL checks between two turns of the event loop
MAX_ACCESS_MEMO = 1_024
_LIST_KEY = ""            # the (subscriber, key) of list_changed
_EXTENSION_KEY = "shoal.mcp.notifier"
_NAMED_KINDS = frozenset({ResourceKind.NODE, ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET,
                          ResourceKind.NETWORK})

Readable = Callable[[Access], bool]


@dataclass(slots=True)
class NotifierStats:
    passes: int = 0
    sent: int = 0
    dropped: int = 0          # notify() answered False (the subscriber's queue was full)
    coalesced: int = 0
    overflows: int = 0
    last_pass_ms: float = 0.0


@dataclass(slots=True)
class _Pass:
    """What one fan-out pass found touched: detail URIs with their ACL judge, the statics, list changes."""

    uris: dict[str, Readable] = field(default_factory=dict)
    listed: list[Readable] = field(default_factory=list)       # creates and removes
    history: list[Readable] = field(default_factory=list)      # changes /history lists
    cluster: bool = False
    findings: list[FindingChange] = field(default_factory=list)


class Notifier:
    """One per app: pending changes in, coalesced notifications out (one greenlet, started on demand)."""

    def __init__(self, app: Flask, cache: Cache, *, clock: Callable[[], float] = time.monotonic,
                 policy_of: Callable[[], object] | None = None, auth_enabled: bool = False) -> None:
        self.app = app
        self.cache = cache
        self.clock = clock
        self.stats = NotifierStats()
        self._policy_of = policy_of
        self._auth_enabled = auth_enabled
        self._pending: list[Change] = []
        self._findings: list[FindingChange] = []
        self._overflow = False
        self._wake = Event()
        self._greenlet: gevent.Greenlet | None = None
        self._sent: dict[tuple[registry.Subscriber, str], float] = {}
        self._deferred: dict[tuple[registry.Subscriber, str], float] = {}   # → when it may be sent
        self._access: dict[Identity, Access] = {}
        self._policy: object = None
        self._stopped = False

    # ------------------------------------------------------------------ listeners (no I/O, O(batch))
    def on_changes(self, changes: list[Change]) -> None:
        if not registry.subscribers(self.app):
            return
        if self._overflow or len(self._pending) + len(changes) > MAX_PENDING:
            if not self._overflow:
                self.stats.overflows += 1
            self._overflow, self._pending = True, []
        else:
            self._pending.extend(changes)
        self._kick()

    def on_findings(self, changes: list[FindingChange]) -> None:
        if not registry.subscribers(self.app) or len(self._findings) + len(changes) > MAX_PENDING:
            return
        self._findings.extend(changes)
        self._kick()

    def _kick(self) -> None:
        self._wake.set()
        if (self._greenlet is None or self._greenlet.dead) and not self._stopped:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        self._stopped = True
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    # ------------------------------------------------------------------ the fan-out greenlet
    def _loop(self) -> None:
        while not self._stopped:
            timeout = None
            if self._deferred:
                timeout = max(0.0, min(self._deferred.values()) - self.clock())
            self._wake.wait(timeout)
            self._wake.clear()
            try:
                self.run_once()
            except Exception:   # a bug must not end notifications for good: log, go on with the next batch
                log.exception("MCP resource notification pass failed")

    def run_once(self) -> None:
        """One pass: the pending changes and findings, then the deferred notifications that are due."""
        started = time.perf_counter()
        changes, self._pending = self._pending, []
        findings, self._findings = self._findings, []
        overflow, self._overflow = self._overflow, False
        subscribers = list(registry.subscribers(self.app))
        if not subscribers:
            self._sent.clear()
            self._deferred.clear()
            return
        if changes or findings or overflow:
            touched = self._everything() if overflow else self._touched(changes)
            touched.findings = findings
            self._fan_out(touched, subscribers)
        self._send_deferred(set(subscribers))
        self._prune()
        self.stats.passes += 1
        self.stats.last_pass_ms = (time.perf_counter() - started) * 1000

    # ------------------------------------------------------------------ what changed
    def _judge_change(self, change: Change) -> Readable:
        keys: list[tuple[str, str]] | None = None

        def readable(access: Access) -> bool:
            nonlocal keys
            if access.unrestricted:
                return True
            if keys is None:
                keys = change_keys(change, self.cache)
            return access.allows_any("read", keys)

        return readable

    def _judge_entry(self, entry: Entry) -> Readable:
        return lambda access: access.can_read(entry, self.cache)

    def _touched(self, changes: Iterable[Change]) -> _Pass:
        touched = _Pass()
        for change in changes:
            judge = self._judge_change(change)
            for uri in object_uris(change.kind, change.id, change.name):
                touched.uris[uri] = judge
            if change.action is not Action.REF_CHANGED:
                touched.cluster = True
                touched.history.append(judge)
                if change.action is not Action.UPDATE:
                    touched.listed.append(judge)
        return touched

    def _everything(self) -> _Pass:
        """After an overflow: every cached object counts as changed (lists, statics, details)."""
        touched = _Pass(cluster=True)
        seen = 0
        for kind in ResourceKind:
            for entry in self.cache.entries(kind):
                judge = self._judge_entry(entry)
                for uri in object_uris(kind, entry.id, entry.name):
                    touched.uris[uri] = judge
                seen += 1
                if seen % YIELD_EVERY == 0:
                    pause()
        everyone: Readable = lambda access: access.has_grants   # noqa: E731
        touched.listed.append(everyone)
        touched.history.append(everyone)
        return touched

    # ------------------------------------------------------------------ who gets what
    def _fan_out(self, touched: _Pass, subscribers: list[registry.Subscriber]) -> None:
        work = 0
        for subscriber in subscribers:
            access = self.access_of(subscriber.identity)
            for uri, readable in touched.uris.items():
                if subscriber.wants(uri) and readable(access):
                    self.due(subscriber, uri)
            if touched.cluster and subscriber.wants(uris.CLUSTER) and access.has_grants:
                self.due(subscriber, uris.CLUSTER)
            if touched.history and subscriber.wants(uris.HISTORY) and any(r(access) for r in touched.history):
                self.due(subscriber, uris.HISTORY)
            if touched.findings and subscriber.wants(uris.RECOMMENDATIONS) and any(
                    may_read_finding(access, self.cache, change.finding) for change in touched.findings):
                self.due(subscriber, uris.RECOMMENDATIONS)
            if touched.listed and subscriber.list_changed and any(r(access) for r in touched.listed):
                self.due(subscriber, _LIST_KEY)
            work += len(touched.uris) + 4
            if work >= YIELD_EVERY:
                work = 0
                pause()

    def due(self, subscriber: registry.Subscriber, key: str, window: float = WINDOW) -> None:
        """Send now, or once at the end of the (subscriber, key) window when one was sent within it."""
        pair = (subscriber, key)
        now = self.clock()
        last = self._sent.get(pair)
        if last is not None and now - last < window:
            self.stats.coalesced += 1
            if pair not in self._deferred:
                self._deferred[pair] = last + window
                self._kick()
            return
        self._send(subscriber, key, now)

    def _send(self, subscriber: registry.Subscriber, key: str, now: float) -> None:
        self._sent[(subscriber, key)] = now
        if key == _LIST_KEY:
            delivered = subscriber.notify(LIST_CHANGED, {})
        else:
            delivered = subscriber.notify(UPDATED, {"uri": key})
        if delivered:
            self.stats.sent += 1
        else:
            self.stats.dropped += 1

    def _send_deferred(self, live: set[registry.Subscriber]) -> None:
        if not self._deferred:
            return
        now = self.clock()
        for pair, when in list(self._deferred.items()):
            if when > now:
                continue
            del self._deferred[pair]
            subscriber, key = pair
            if subscriber in live and (key == _LIST_KEY or subscriber.wants(key)):
                self._send(subscriber, key, now)

    def _prune(self) -> None:
        now = self.clock()
        for pair, sent in list(self._sent.items()):
            if now - sent >= LOG_WINDOW and pair not in self._deferred:
                del self._sent[pair]

    # ------------------------------------------------------------------ ACL per identity
    def _refresh_policy(self) -> None:
        policy = self._policy_of() if self._policy_of is not None else None
        if policy is not self._policy or len(self._access) > MAX_ACCESS_MEMO:
            self._policy = policy
            self._access.clear()

    def access_of(self, identity: Identity) -> Access:
        """The identity's Access under the current policy (memoised until the policy object changes)."""
        self._refresh_policy()
        access = self._access.get(identity)
        if access is None:
            policy: Any = self._policy
            access = self._access[identity] = access_for(identity, policy, auth_enabled=self._auth_enabled)
        return access


def object_uris(kind: ResourceKind, object_id: str, name: str) -> tuple[str, ...]:
    """The detail URIs of one object: by id, and by name where names are accepted and differ."""
    by_id = uris.detail_uri(kind, object_id)
    if kind in _NAMED_KINDS and name and name != object_id:
        return by_id, uris.detail_uri(kind, name)
    return (by_id,)


def notifier(app: Flask) -> Notifier | None:
    found = app.extensions.get(_EXTENSION_KEY)
    return found if isinstance(found, Notifier) else None


def init(app: Flask) -> Notifier:
    """Attach the notifier to the app's cache and recommendation engine (listeners only: no greenlet
    starts before the first change that some subscriber may want)."""
    existing = notifier(app)
    if existing is not None:
        return existing
    runtime = runtime_of(app)
    made = Notifier(app, runtime.cache, policy_of=lambda: runtime.policy.policy,
                    auth_enabled=runtime.settings.auth_mode != "none")
    runtime.cache.subscribe(made.on_changes)
    runtime.recommendations.subscribe(made.on_findings)
    app.extensions[_EXTENSION_KEY] = made
    return made
