"""History bounded in bytes as well as in records (docs/cache-exactness.md), and the size estimates behind it."""

from __future__ import annotations

import pytest

from app.cache.entries import MEMORY_PER_ENCODED_BYTE, build_entry, estimate_size
from app.cache.history import RECORD_OVERHEAD, Action, History
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def test_a_record_costs_the_overhead_plus_the_given_size() -> None:
    history = History(10, 10_000)
    change = history.record(K.NODE, Action.UPDATE, "n", "n", None, None, 500)
    assert change.size == RECORD_OVERHEAD + 500
    assert history.bytes == change.size


def test_the_oldest_records_go_while_over_the_byte_bound() -> None:
    history = History(capacity=100, max_bytes=3 * (RECORD_OVERHEAD + 1000))
    for index in range(5):
        history.record(K.NODE, Action.UPDATE, f"n{index}", "n", None, None, 1000)
    assert [c.seq for c in history.newest_first()] == [5, 4, 3]
    assert history.bytes == 3 * (RECORD_OVERHEAD + 1000)
    assert history.since(1) is None            # 2 was evicted: the client must resync
    assert [c.seq for c in history.since(2) or []] == [3, 4, 5]


def test_the_newest_record_stays_even_when_it_alone_exceeds_the_bound() -> None:
    history = History(capacity=100, max_bytes=1000)
    history.record(K.NODE, Action.UPDATE, "small", "n", None, None, 10)
    history.record(K.NODE, Action.UPDATE, "huge", "n", None, None, 50_000)
    assert [c.id for c in history.newest_first()] == ["huge"]
    assert history.since(2) == []
    assert [c.id for c in history.since(1) or []] == ["huge"]
    assert history.since(0) is None


def test_the_record_bound_still_applies() -> None:
    history = History(capacity=2, max_bytes=10**9)
    for index in range(4):
        history.record(K.NODE, Action.UPDATE, f"n{index}", "n", None, None, 0)
    assert len(history) == 2 and history.oldest_seq == 3


@pytest.mark.parametrize(("capacity", "max_bytes"), [(0, 100), (10, 0)])
def test_bounds_must_be_positive(capacity: int, max_bytes: int) -> None:
    with pytest.raises(ValueError):
        History(capacity, max_bytes)


def test_entry_sizes_scale_with_the_encoded_object() -> None:
    small = build_entry(K.CONFIG, o.config("c", "c", data="x"))
    large = build_entry(K.CONFIG, o.config("c", "c", data="x" * 100_000))
    assert large.size - small.size >= 100_000 * MEMORY_PER_ENCODED_BYTE - 10
    assert estimate_size({"a": object()}) > 0    # not marshallable: still estimated


def test_cache_changes_carry_the_sizes_of_before_and_after() -> None:
    cache = Cache()
    created = cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=1))[0]
    entry = cache.get(K.NODE, o.NODE_MANAGER)
    assert entry is not None and created.size == RECORD_OVERHEAD + entry.size
    updated = cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=2))[0]
    assert updated.size == RECORD_OVERHEAD + 2 * entry.size
    removed = cache.remove(K.NODE, o.NODE_MANAGER)[0]
    assert removed.size == RECORD_OVERHEAD + entry.size


def test_cache_history_is_bounded_in_bytes() -> None:
    one_update = RECORD_OVERHEAD + 2 * build_entry(K.NODE, o.node(o.NODE_MANAGER, "m")).size
    cache = Cache(history_capacity=1000, history_max_bytes=5 * one_update)
    for version in range(1, 21):
        cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=version))
    assert cache.history.bytes <= 5 * one_update
    assert len(cache.history) == 5
    assert cache.history.last_seq == 20
