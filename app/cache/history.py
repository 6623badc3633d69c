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

Numbers are unique forever, not only within one process (``app.store`` and docs/state-store.md): a new
sequence starts at :func:`sequence_base` (microseconds since the Unix epoch), and after an unclean stop the
numbering goes on past a gap that covers every number the dead process may have sent without committing it.
So the ring may hold holes. A position (a ``Last-Event-ID``) is valid when it is a record's number, the number
just before a record (the start of a run: a sequence's start, the end of a gap, or a record that left the
ring) or ``last_seq``; any other number (inside a gap, ahead, before this sequence) gets ``None``: resync.
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
    def max_bytes(self) -> int:
        return self._max_bytes

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
        self._trim()
        return change

    def restore(self, records: Iterable[Change], last_seq: int) -> None:
        """Continue a sequence persisted by an earlier process: keep ``records`` (ascending, holes allowed:
        gaps left by unclean stops), within the bounds; the next record is ``last_seq + 1``. ``last_seq`` may
        lie past the newest record (the end of a gap); records past it were never committed and are dropped.

        Only an empty, never-used ring can be restored: numbers already handed out must not be reused."""
        if self._seq or self._ring:
            raise ValueError("only an empty history can be restored")
        if last_seq < 0:
            raise ValueError("the sequence cannot be negative")
        self._seq = last_seq
        for change in records:
            if change.seq > last_seq or (self._ring and change.seq <= self._ring[-1].seq):
                continue
            self._ring.append(change)
            self._bytes += change.size
        self._trim()

    def _trim(self) -> None:
        while len(self._ring) > 1 and (len(self._ring) > self._capacity or self._bytes > self._max_bytes):
            self._bytes -= self._ring.popleft().size

    @property
    def has_holes(self) -> bool:
        """Whether the ring's numbers are not consecutive (a gap after an unclean stop lies inside it)."""
        return bool(self._ring) and self._ring[-1].seq - self._ring[0].seq != len(self._ring) - 1

    def _index_after(self, seq: int) -> int:
        """Position of the first record numbered above ``seq``."""
        if not self.has_holes:
            return min(len(self._ring), max(0, seq - self._ring[0].seq + 1))
        return bisect.bisect_right(self._ring, seq, key=_seq_of)

    def since(self, seq: int) -> list[Change] | None:
        """Changes after ``seq``; None when ``seq`` is not a position of this sequence that the ring can
        serve (ahead of it, inside a gap, before this sequence, or fallen out of the ring): resync."""
        if seq > self._seq:
            return None
        if seq == self._seq:
            return []
        if not self._ring or seq > self._ring[-1].seq:
            return None   # between the newest record and last_seq: inside a gap (or never a position)
        if seq == self._ring[-1].seq:
            return []
        index = self._index_after(seq)
        follows = self._ring[index].seq == seq + 1
        if not follows and not (index and self._ring[index - 1].seq == seq):
            return None
        return list(itertools.islice(self._ring, index, None))

    def newest_first(self, before: int | None = None) -> Iterator[Change]:
        """Records newest first; with ``before``, only those with a smaller sequence number. Without holes
        the start is found by position (C-level skipping), with holes by bisection: never a scan."""
        records = reversed(self._ring)
        if before is None or not self._ring:
            return records
        skip = len(self._ring) - self._index_after(before - 1)
        if skip <= 0:
            return records
        return itertools.islice(records, skip, None)

    def get(self, seq: int) -> Change | None:
        """The record with this sequence number, None when it is not (or no longer) in the ring."""
        if not self._ring or not self._ring[0].seq <= seq <= self._ring[-1].seq:
            return None
        index = self._index_after(seq) - 1
        change = self._ring[index] if index >= 0 else None
        return change if change is not None and change.seq == seq else None

    def __len__(self) -> int:
        return len(self._ring)


def _seq_of(change: Change) -> int:
    return change.seq


def sequence_base(now: float | None = None) -> int:
    """Where a new sequence starts: microseconds since the Unix epoch (about 1.8e15, below 2**53, so
    JavaScript clients keep ids exact). Every number of an earlier sequence is lower, as long as the numbers
    were handed out at less than one per microsecond on average."""
    return int((time.time() if now is None else now) * 1_000_000)
