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

Related changes (``ref_changed``: a task or a referenced object of the record's object changed) keep a lane
of their own, bounded to a quarter of both bounds (``RELATED_SHARE``), so a crash-looping service's flood of
them never evicts a change of an object itself (docs/history-and-feeds.md): the changes of objects keep the whole
``capacity`` and ``max_bytes``. Readers see one sequence: ``newest_first`` and ``since`` merge the lanes
lazily by number. A replay (``since``) from before a related change that left its lane answers ``None``
(resync), as for any record that left the ring: detail streams never miss one silently.

Numbers are unique forever, not only within one process (``app.store`` and docs/state-store.md): a new
sequence starts at :func:`sequence_base` (microseconds since the Unix epoch), and after an unclean stop the
numbering goes on past a gap that covers every number the dead process may have sent without committing it.
So the ring may hold holes. A position (a ``Last-Event-ID``) is valid when it is a record's number, the number
just before a record (the start of a run: a sequence's start, the end of a gap, or a record that left the
ring) or ``last_seq``; any other number (inside a gap, ahead, before this sequence) gets ``None``: resync.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from app.resources import ResourceKind

RECORD_OVERHEAD = 240   # bytes: the Change object, its id/name strings, its slot in the ring
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
RELATED_SHARE = 4       # related changes keep a lane of capacity / 4 records and max_bytes / 4 bytes


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


class _Lane:
    """One bounded run of records in sequence order; the oldest go first, the newest always stays."""

    __slots__ = ("bytes", "capacity", "lost", "max_bytes", "records")

    def __init__(self, capacity: int, max_bytes: int) -> None:
        self.records: deque[Change] = deque()
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.bytes = 0
        self.lost = 0          # the newest number evicted: a replay from before it would miss a record

    def append(self, change: Change) -> None:
        self.records.append(change)
        self.bytes += change.size

    def trim(self) -> None:
        records = self.records
        while len(records) > 1 and (len(records) > self.capacity or self.bytes > self.max_bytes):
            gone = records.popleft()
            self.bytes -= gone.size
            self.lost = max(self.lost, gone.seq)

    def index_after(self, seq: int) -> int:
        """Position of the first record numbered above ``seq`` (by position when consecutive)."""
        records = self.records
        if not records:
            return 0
        if records[-1].seq - records[0].seq == len(records) - 1:
            return min(len(records), max(0, seq - records[0].seq + 1))
        return bisect.bisect_right(records, seq, key=_seq_of)

    def get(self, seq: int) -> Change | None:
        records = self.records
        if not records or not records[0].seq <= seq <= records[-1].seq:
            return None
        index = self.index_after(seq) - 1
        change = records[index] if index >= 0 else None
        return change if change is not None and change.seq == seq else None

    def newest_first(self, before: int | None) -> Iterator[Change]:
        found = reversed(self.records)
        if before is None or not self.records:
            return found
        skip = len(self.records) - self.index_after(before - 1)
        return itertools.islice(found, skip, None) if skip > 0 else found

    def after(self, seq: int) -> list[Change]:
        return list(itertools.islice(self.records, self.index_after(seq), None))


class History:
    """The last ``capacity`` changes within ``max_bytes``, searchable by sequence number; related changes
    (``ref_changed``) kept beside them in a lane of their own, so they never evict a change of an object."""

    def __init__(self, capacity: int = 10_000, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if capacity < 1 or max_bytes < 1:
            raise ValueError("history capacity and byte bound must be positive")
        self._own = _Lane(capacity, max_bytes)
        self._related = _Lane(max(1, capacity // RELATED_SHARE), max(1, max_bytes // RELATED_SHARE))
        self._max_bytes = max_bytes
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def oldest_seq(self) -> int | None:
        fronts = [lane.records[0].seq for lane in (self._own, self._related) if lane.records]
        return min(fronts) if fronts else None

    @property
    def complete_after(self) -> int:
        """Every record numbered above this is in the ring (0: none ever left it); below, a lane lost some
        (``app.history.archive`` reads those pages from the store)."""
        return max(self._own.lost, self._related.lost)

    @property
    def max_bytes(self) -> int:
        """The bound on changes of objects; related changes may add up to a quarter of it."""
        return self._max_bytes

    @property
    def bytes(self) -> int:
        """Estimated bytes of the records kept (the sum of their ``size``)."""
        return self._own.bytes + self._related.bytes

    @property
    def related_count(self) -> int:
        """How many related changes (``ref_changed``) the ring holds."""
        return len(self._related.records)

    def _lane(self, action: Action) -> _Lane:
        return self._related if action is Action.REF_CHANGED else self._own

    def record(self, kind: ResourceKind, action: Action, object_id: str, name: str,
               before: dict[str, Any] | None, after: dict[str, Any] | None, size: int = 0) -> Change:
        """Append one change; ``size`` is the estimated bytes of ``before`` and ``after``."""
        self._seq += 1
        change = Change(self._seq, kind, action, object_id, name, time.time(), before, after,
                        RECORD_OVERHEAD + size)
        lane = self._lane(action)
        lane.append(change)
        lane.trim()
        return change

    def restore(self, records: Iterable[Change], last_seq: int) -> None:
        """Continue a sequence persisted by an earlier process: keep ``records`` (ascending, holes allowed:
        gaps left by unclean stops), within the bounds; the next record is ``last_seq + 1``. ``last_seq`` may
        lie past the newest record (the end of a gap); records past it were never committed and are dropped.

        Only an empty, never-used ring can be restored: numbers already handed out must not be reused."""
        if self._seq or self._own.records or self._related.records:
            raise ValueError("only an empty history can be restored")
        if last_seq < 0:
            raise ValueError("the sequence cannot be negative")
        self._seq = last_seq
        newest = 0
        for change in records:
            if change.seq > last_seq or change.seq <= newest:
                continue
            newest = change.seq
            self._lane(change.action).append(change)
        self._own.trim()
        self._related.trim()

    @property
    def has_holes(self) -> bool:
        """Whether the ring's numbers are not consecutive (a gap after an unclean stop, or related changes
        evicted before the changes of objects around them)."""
        oldest = self.oldest_seq
        return oldest is not None and self._newest_kept() - oldest != len(self) - 1

    def _newest_kept(self) -> int:
        return max((lane.records[-1].seq for lane in (self._own, self._related) if lane.records), default=0)

    def _is_position(self, seq: int) -> bool:
        """A record's number or the number just before one (a run's start: a sequence's start, the end of
        a gap, a record that left the ring)."""
        return any(lane.get(number) is not None for lane in (self._own, self._related) for number in (seq, seq + 1))

    def since(self, seq: int) -> list[Change] | None:
        """Changes after ``seq``; None when ``seq`` is not a position of this sequence that the ring can
        serve completely (ahead of it, inside a gap, before this sequence, or a record after it fell out of
        the ring, a related change included): resync."""
        if seq > self._seq:
            return None
        if seq == self._seq:
            return []
        if seq < max(self._own.lost, self._related.lost) or not self._is_position(seq):
            return None
        own, related = self._own.after(seq), self._related.after(seq)
        return sorted(own + related, key=_SEQ) if related else own   # two sorted runs: one C-level merge

    def newest_first(self, before: int | None = None) -> Iterator[Change]:
        """Records newest first; with ``before``, only those with a smaller sequence number. Each lane's
        start is found by position (C-level skipping) or bisection, never a scan; the lanes merge lazily."""
        own, related = self._own.newest_first(before), self._related.newest_first(before)
        if not self._related.records:
            return own
        return heapq.merge(own, related, key=_SEQ, reverse=True)

    def get(self, seq: int) -> Change | None:
        """The record with this sequence number, None when it is not (or no longer) in the ring."""
        return self._own.get(seq) or self._related.get(seq)

    def __len__(self) -> int:
        return len(self._own.records) + len(self._related.records)


def _seq_of(change: Change) -> int:
    return change.seq


_SEQ = operator.attrgetter("seq")


def sequence_base(now: float | None = None) -> int:
    """Where a new sequence starts: microseconds since the Unix epoch (about 1.8e15, below 2**53, so
    JavaScript clients keep ids exact). Every number of an earlier sequence is lower, as long as the numbers
    were handed out at less than one per microsecond on average."""
    return int((time.time() if now is None else now) * 1_000_000)
