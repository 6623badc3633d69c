"""A least-recently-used map bounded both in entries and in (estimated) bytes.

Shared by the regular-expression cache and the compiled-filter cache: a count bound alone let 33 heavy
filters grow the worker by 660 MB, because one entry can weigh a few bytes or a few megabytes. The caller
supplies each value's size estimate; the map never holds more than ``max_entries`` values nor more than
``max_bytes`` estimated bytes, and refuses (does not store) a value that alone exceeds ``max_bytes``.

Not thread-safe; it lives in the gevent worker, where nothing switches greenlets inside a method.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class LRUStats:
    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class BoundedLRU(Generic[K, V]):
    def __init__(self, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("an LRU needs room for at least one entry and one byte")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            self._misses += 1
            return None
        self._items.move_to_end(key)
        self._hits += 1
        return found[0]

    def put(self, key: K, value: V, size: int) -> bool:
        """Store ``value`` as most recently used, evicting the oldest entries to make room.

        Returns False (and stores nothing) when ``size`` alone is over ``max_bytes``.
        """
        self.discard(key)
        if size > self.max_bytes:
            return False
        self._items[key] = (value, size)
        self._bytes += size
        while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
            _, (_, evicted) = self._items.popitem(last=False)
            self._bytes -= evicted
            self._evictions += 1
        return True

    def discard(self, key: K) -> None:
        found = self._items.pop(key, None)
        if found is not None:
            self._bytes -= found[1]

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def bytes(self) -> int:
        return self._bytes

    def stats(self) -> LRUStats:
        return LRUStats(len(self._items), self._bytes, self.max_entries, self.max_bytes, self._hits,
                        self._misses, self._evictions)
