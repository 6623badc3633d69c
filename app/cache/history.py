"""Change records and the bounded ring that keeps the most recent ones.

Every mutation of the cache becomes one ``Change`` with a strictly increasing sequence number. The
ring is what later layers replay from: SSE ``Last-Event-ID``, Atom ``before`` cursors and ``/history``
all index into it by sequence number.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from app.resources import ResourceKind


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


class History:
    """A ring of the last ``capacity`` changes, searchable by sequence number."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._ring: deque[Change] = deque(maxlen=capacity)
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def oldest_seq(self) -> int | None:
        return self._ring[0].seq if self._ring else None

    def record(self, kind: ResourceKind, action: Action, object_id: str, name: str,
               before: dict[str, Any] | None, after: dict[str, Any] | None) -> Change:
        self._seq += 1
        change = Change(self._seq, kind, action, object_id, name, time.time(), before, after)
        self._ring.append(change)
        return change

    def since(self, seq: int) -> list[Change] | None:
        """Changes after ``seq``; None when ``seq`` fell out of the ring (the caller must resync)."""
        if seq > self._seq:
            return None
        if not self._ring or seq >= self._ring[-1].seq:
            return []
        if seq < self._ring[0].seq - 1:
            return None
        index = bisect.bisect_right(self._ring, seq, key=lambda change: change.seq)
        return list(self._ring)[index:]

    def newest_first(self) -> Iterator[Change]:
        return reversed(self._ring)

    def __len__(self) -> int:
        return len(self._ring)
