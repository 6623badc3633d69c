"""Readable subsets of the cache's shared lists, kept across requests (the list pipeline's ACL step).

Judging 10,000 tasks through the evaluator costs a few milliseconds of Python per request (a dict hit per
task at best), more than the rest of a cached list request, which slices a shared, memoised list. What an
identity may read of a list depends only on its grants and on the cache's content, so the subset is
computed once per (grants, list) and reused:

- the cache replaces a kind's shared lists (plain and sorted) on every write to that kind, and the memo
  keeps the list it filtered and compares by identity, so a changed kind never hits;
- a task is judged through its service (name, stack label), so the services list is compared too;
- every change batch clears the memo (``Cache.subscribe``), so it never keeps superseded entries alive.

A policy reload needs nothing: the key is the grants themselves (values), not the policy object.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar
from weakref import WeakKeyDictionary

from app.cache.entries import Entry
from app.cache.store import Cache
from app.query.budget import Budget
from app.resources import ResourceKind

MEMO_SIZE = 64          # (grants, list) pairs kept; least recently used dropped first

Kept = tuple[Sequence[Entry], list[Entry], list[Entry]]     # (list filtered, services list then, subset)


class ReadableMemo:
    def __init__(self, cache: Cache, size: int = MEMO_SIZE) -> None:
        self._cache = cache
        self._size = size
        self._kept: OrderedDict[tuple[Hashable, int], Kept] = OrderedDict()
        self.hits = self.misses = 0
        cache.subscribe(self._changed)

    def _changed(self, changes: list[Any]) -> None:
        if changes:
            self._kept.clear()

    def clear(self) -> None:
        """Forget every subset (benchmarks measure the cold path with it)."""
        self._kept.clear()

    def select(self, key: Hashable, entries: Sequence[Entry], keep: Callable[[Entry], bool]) -> list[Entry]:
        """``[e for e in entries if keep(e)]``, from the memo when ``entries`` and the services are the
        lists filtered last time under ``key``; the result is shared: callers must not mutate it."""
        services = self._cache.entries(ResourceKind.SERVICE)
        slot = (key, id(entries))
        kept = self._kept.get(slot)
        if kept is not None and kept[0] is entries and kept[1] is services:
            self._kept.move_to_end(slot)
            self.hits += 1
            return kept[2]
        self.misses += 1
        subset = Budget(limit=math.inf).select(entries, keep)     # yields between slices
        if self._cache.entries(ResourceKind.SERVICE) is services:  # nothing changed meanwhile: keep it
            self._kept[slot] = (entries, services, subset)
            self._kept.move_to_end(slot)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return subset


T = TypeVar("T")


class PerCache(Generic[T]):
    """One ``T`` per cache (the ACL memos), made on first use and dropped with its cache."""

    def __init__(self, make: Callable[[Cache], T]) -> None:
        self._make = make
        self._made: WeakKeyDictionary[Cache, T] = WeakKeyDictionary()

    def __call__(self, cache: Cache) -> T:
        made = self._made.get(cache)
        if made is None:
            made = self._made[cache] = self._make(cache)
        return made


memo_for: PerCache[ReadableMemo] = PerCache(ReadableMemo)


def readable_subset(cache: Cache, entries: Sequence[Entry], keep: Callable[[Entry], bool]) -> list[Entry]:
    """The entries ``keep`` accepts; memoised when ``keep`` has a ``memo_key`` (the same key ⇒ the same
    decisions, e.g. ``("read", grants)``), else computed (in yielding slices)."""
    key = getattr(keep, "memo_key", None)
    if key is None:
        return Budget(limit=math.inf).select(entries, keep)
    return memo_for(cache).select(key, entries, keep)
