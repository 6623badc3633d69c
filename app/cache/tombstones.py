"""Tombstones: the logical time (``Cache.write_token`` clock) of each recent removal, so a late engine
answer cannot undo it.

An inspect or listing that started before a removal was applied (its token is older than the removal's
time) still shows the object; the cache must refuse to re-create it. The cache remembers the
last ``max_count`` removals (default 100,000) for at most ``max_age`` seconds (default 15 minutes),
whichever bound is hit first. Forgetting is safe as long as it is tracked: ``floor`` is the latest time
of a forgotten removal, and an answer whose token is older than ``floor`` cannot prove that
the object it shows was not removed since, so it may not create objects (the watcher's engine calls time
out long before 15 minutes, so in practice only a pathological answer meets the floor).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from app.resources import ResourceKind

Key = tuple[ResourceKind, str]
MAX_COUNT = 100_000
MAX_AGE = 15 * 60.0


class Tombstones:
    def __init__(self, max_count: int = MAX_COUNT, max_age: float = MAX_AGE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # Oldest first; OrderedDict pops its front in O(1), where a dict slows down after many front pops.
        self._removed: OrderedDict[Key, tuple[int, float]] = OrderedDict()
        self._max_count = max_count
        self._max_age = max_age
        self._clock = clock
        self.floor = 0

    def add(self, key: Key, at: int) -> None:
        self._removed.pop(key, None)
        self._removed[key] = (at, self._clock())
        self.prune()

    def discard(self, key: Key) -> None:
        """Forget a removal because the object exists again (its entry now carries the newer time)."""
        if self._removed:  # hashing a key costs a Python call (ResourceKind.__hash__): skip it when empty
            self._removed.pop(key, None)

    def removed_at(self, key: Key) -> int | None:
        found = self._removed.get(key)
        return None if found is None else found[0]

    def prune(self) -> None:
        """Drop removals beyond the count or the age bound, raising ``floor`` past them."""
        oldest_kept = self._clock() - self._max_age
        while self._removed:
            key, (removed, since) = next(iter(self._removed.items()))
            if len(self._removed) <= self._max_count and since >= oldest_kept:
                break
            del self._removed[key]
            self.floor = max(self.floor, removed)

    def __len__(self) -> int:
        return len(self._removed)
