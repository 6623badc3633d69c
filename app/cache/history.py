"""Change records and the bounded ring that keeps the most recent ones.

Every mutation of the cache becomes one ``Change`` with a strictly increasing sequence number. The
ring is what later layers replay from: SSE ``Last-Event-ID``, Atom ``before`` cursors and ``/history``
all index into it by sequence number.

The ring is bounded twice: at most ``capacity`` records and at most ``max_bytes`` estimated bytes. Each
record's size is fixed when it is made (``RECORD_OVERHEAD`` plus the estimated sizes of its ``before`` and
``after`` objects, see ``app.cache.entries.estimate_size``); the oldest records go first while either bound
is exceeded, but the newest record always stays, so ``since`` can tell a client it is up to date. An object
shared by two records (the ``after`` of one is the ``before`` of the next, and the live cache holds the
latest) is counted for each, so the bound overestimates what the ring alone keeps alive.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from app.resources import ResourceKind

RECORD_OVERHEAD = 240   # bytes: the Change object, its id/name strings, its slot in the ring
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class Action(Enum):
    CREATE = "create"
    UPDATE = "update"
    REMOVE = "remove"
    REF_CHANGED = "ref_changed"


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    kind: ResourceKind
    action: Action
    id: str
    name: str
    timestamp: float                      # wall-clock seconds
    before: dict[str, Any] | None = field(default=None, repr=False)
    after: dict[str, Any] | None = field(default=None, repr=False)
    size: int = field(default=RECORD_OVERHEAD, repr=False, compare=False)   # estimated bytes held


class History:
    """A ring of the last ``capacity`` changes within ``max_bytes``, searchable by sequence number."""

    def __init__(self, capacity: int = 10_000, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if capacity < 1 or max_bytes < 1:
            raise ValueError("history capacity and byte bound must be positive")
        self._ring: deque[Change] = deque()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def oldest_seq(self) -> int | None:
        return self._ring[0].seq if self._ring else None

    @property
    def bytes(self) -> int:
        """Estimated bytes of the records kept (the sum of their ``size``)."""
        return self._bytes

    def record(self, kind: ResourceKind, action: Action, object_id: str, name: str,
               before: dict[str, Any] | None, after: dict[str, Any] | None, size: int = 0) -> Change:
        """Append one change; ``size`` is the estimated bytes of ``before`` and ``after``."""
        self._seq += 1
        change = Change(self._seq, kind, action, object_id, name, time.time(), before, after,
                        RECORD_OVERHEAD + size)
        self._ring.append(change)
        self._bytes += change.size
        while len(self._ring) > 1 and (len(self._ring) > self._capacity or self._bytes > self._max_bytes):
            self._bytes -= self._ring.popleft().size
        return change

    def restore(self, records: Iterable[Change], last_seq: int) -> None:
        """Continue a sequence persisted by an earlier process: keep the consecutive run of ``records``
        (ascending) that ends at ``last_seq``, within the bounds; the next record is ``last_seq + 1``.

        Only an empty, never-used ring can be restored: numbers already handed out must not be reused."""
        if self._seq or self._ring:
            raise ValueError("only an empty history can be restored")
        if last_seq < 0:
            raise ValueError("the sequence cannot be negative")
        run: list[Change] = []
        for change in records:
            if run and change.seq != run[-1].seq + 1:
                run = []   # a hole: only the run after it can be served by position
            run.append(change)
        if not run or run[-1].seq != last_seq:
            run = []       # the records do not end where the sequence does: none of them can be trusted
        self._seq = last_seq
        for change in run:
            self._ring.append(change)
            self._bytes += change.size
        while len(self._ring) > 1 and (len(self._ring) > self._capacity or self._bytes > self._max_bytes):
            self._bytes -= self._ring.popleft().size

    def since(self, seq: int) -> list[Change] | None:
        """Changes after ``seq``; None when ``seq`` fell out of the ring (the caller must resync)."""
        if seq > self._seq:
            return None
        if not self._ring:
            return [] if seq == self._seq else None
        if seq >= self._ring[-1].seq:
            return []
        if seq < self._ring[0].seq - 1:
            return None
        index = bisect.bisect_right(self._ring, seq, key=lambda change: change.seq)
        return list(self._ring)[index:]

    def newest_first(self, before: int | None = None) -> Iterator[Change]:
        """Records newest first; with ``before``, only those with a smaller sequence number. The ring holds
        consecutive numbers, so the start is found by position (C-level skipping), not by a scan."""
        records = reversed(self._ring)
        if before is None or not self._ring:
            return records
        skip = self._ring[-1].seq - before + 1
        if skip <= 0:
            return records
        return itertools.islice(records, skip, None)

    def get(self, seq: int) -> Change | None:
        """The record with this sequence number, None when it is not (or no longer) in the ring."""
        if not self._ring or not self._ring[0].seq <= seq <= self._ring[-1].seq:
            return None
        change = self._ring[seq - self._ring[0].seq]
        return change if change.seq == seq else None

    def __len__(self) -> int:
        return len(self._ring)
