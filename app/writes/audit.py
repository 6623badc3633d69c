"""Who made a change through this service: the history entry's ``audit`` slot ``{identity, requestId}``.

Why a listener and not a field set by the write: the cache records the change when the engine's state
reaches it, by whichever path comes first (the watcher's event, or the write's own read-back), possibly
before the write's engine call has even returned. So a write announces itself before calling the engine
(:meth:`AuditLog.expect`), and the first change record of that object that follows is stamped with the
write's audit. An expectation that no change meets (the write failed, or changed nothing) lapses after
:data:`EXPECT_SECONDS`. A write whose outcome is unknown (the engine call timed out after the request was
sent: the engine may apply it minutes later) is announced again with a longer lifetime
(``writes.pending_audit``), so the change is still stamped when the watcher sees it. Expectations past their
lifetime are pruned as new ones arrive, so the map stays bounded by the objects written recently. Stamps
are kept for the last :data:`KEEP` records (the ring's size); they are not
persisted across restarts.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.resources import ResourceKind

EXPECT_SECONDS = 30.0
KEEP = 10_000
PRUNE_AT = 256   # expectations held before lapsed ones are dropped

Audit = dict[str, Any]


class AuditLog:
    def __init__(self, cache: Cache, keep: int = KEEP, clock: Callable[[], float] = time.monotonic) -> None:
        self._expected: dict[tuple[ResourceKind, str], tuple[Audit, float]] = {}
        self._stamps: OrderedDict[int, Audit] = OrderedDict()
        self._keep = keep
        self._clock = clock
        self._unsubscribe = cache.subscribe(self._on_changes)

    def expect(self, kind: ResourceKind, object_id: str, audit: Audit, lifetime: float = EXPECT_SECONDS
               ) -> Callable[[], None]:
        """Stamp the next change of this object within ``lifetime`` seconds; the returned function withdraws
        the expectation."""
        key = (kind, object_id)
        now = self._clock()
        if len(self._expected) >= PRUNE_AT:
            for stale in [k for k, (_, deadline) in self._expected.items() if deadline < now]:
                del self._expected[stale]
        self._expected[key] = (audit, now + lifetime)

        def withdraw() -> None:
            current = self._expected.get(key)
            if current is not None and current[0] is audit:
                del self._expected[key]

        return withdraw

    def of(self, seq: int) -> Audit | None:
        return self._stamps.get(seq)

    def pending(self, kind: ResourceKind, object_id: str) -> Audit | None:
        """The audit still waiting for a change of this object (None when none is, or it lapsed)."""
        expected = self._expected.get((kind, object_id))
        return expected[0] if expected is not None and expected[1] >= self._clock() else None

    def _on_changes(self, changes: list[Change]) -> None:
        if not self._expected:
            return
        now = self._clock()
        for change in changes:
            if change.action is Action.REF_CHANGED:   # a task of it changed, not the object itself
                continue
            key = (change.kind, change.id)
            expected = self._expected.get(key)
            if expected is None:
                continue
            del self._expected[key]
            if expected[1] < now:
                continue
            self._stamps[change.seq] = expected[0]
            while len(self._stamps) > self._keep:
                self._stamps.popitem(last=False)

    def close(self) -> None:
        self._unsubscribe()
