"""Cache.restore and History.restore: persisted state loaded without changes, the sequence continued, and
the first full sync afterwards yields exactly what changed meanwhile."""

from __future__ import annotations

import copy

import pytest

from app.cache.entries import Entry, build_entry
from app.cache.history import Action, Change, History, sequence_base
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit.objects import (
    CFG_OTHER,
    CFG_SHOP,
    NODE_WORKER,
    SEC_OTHER,
    SVC_MONITOR,
    SVC_WEB,
    Raw,
    cluster,
    secret,
)

K = ResourceKind


def _persisted(objects: dict[ResourceKind, list[Raw]]) -> tuple[Cache, list[Change]]:
    """A cache that lived: synced, then one update; returns it and its ring (oldest first)."""
    cache = Cache()
    cache.replace_all(copy.deepcopy(objects))
    services = copy.deepcopy(objects[K.SERVICE])
    services[0]["Version"]["Index"] += 1
    services[0]["Spec"]["Labels"]["tier"] = "front"
    cache.apply_listing(K.SERVICE, services, cache.write_token())
    return cache, list(cache.history.newest_first())[::-1]


def _entries(objects: dict[ResourceKind, list[Raw]]) -> list[Entry]:
    return [build_entry(kind, copy.deepcopy(raw)) for kind, raws in objects.items() for raw in raws]


def _state(cache: Cache) -> dict[ResourceKind, dict[str, Raw]]:
    return {kind: {entry.id: entry.raw for entry in cache.entries(kind)} for kind in ResourceKind}


def test_restore_rebuilds_entries_indexes_and_stacks_without_changes() -> None:
    objects = cluster()
    lived, ring = _persisted(objects)
    snapshot = {kind: [e.raw for e in lived.entries(kind)] for kind in ResourceKind if kind is not K.STACK}
    restored = Cache()
    emitted: list[list[Change]] = []
    restored.subscribe(emitted.append)
    restored.restore(_entries(snapshot), ring, lived.history.last_seq)

    assert emitted == []
    assert _state(restored) == _state(lived)          # stacks derived again from the services
    assert [e.id for e in restored.entries(K.STACK)] == ["shop"]
    assert restored.history.last_seq == lived.history.last_seq
    assert list(restored.history.newest_first()) == list(lived.history.newest_first())
    assert {e.id for e in restored.tasks_of_service(SVC_WEB)} == {e.id for e in lived.tasks_of_service(SVC_WEB)}
    assert {e.id for e in restored.tasks_of_node(NODE_WORKER)} == {e.id for e in lived.tasks_of_node(NODE_WORKER)}
    assert restored.running_tasks(SVC_WEB) == lived.running_tasks(SVC_WEB) == 2
    assert [e.id for e in restored.services_using(K.CONFIG, CFG_OTHER)] == [SVC_MONITOR]
    assert [e.id for e in restored.stack_members("shop", K.CONFIG)] == [CFG_SHOP]
    freshness = restored.freshness
    assert (freshness.synced, freshness.connected, freshness.last_sync) == (False, False, None)
    assert freshness.seq == lived.history.last_seq


def test_first_sync_after_restore_yields_what_changed_meanwhile_numbered_after_the_sequence() -> None:
    objects = cluster()
    lived, ring = _persisted(objects)
    last = lived.history.last_seq
    snapshot = {kind: [e.raw for e in lived.entries(kind)] for kind in ResourceKind if kind is not K.STACK}
    restored = Cache()
    restored.restore(_entries(snapshot), ring, last)

    engine = copy.deepcopy(snapshot)                                     # what the engine says after the restart
    engine[K.CONFIG] = [c for c in engine[K.CONFIG] if c["ID"] != CFG_OTHER]   # removed meanwhile
    engine[K.SECRET].append(secret("secnew" + "0" * 19, "new_secret"))         # created meanwhile
    monitor = next(s for s in engine[K.SERVICE] if s["ID"] == SVC_MONITOR)
    monitor["Version"]["Index"] += 5
    monitor["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "prom/node-exporter:v1.9.0"  # updated
    emitted: list[list[Change]] = []
    restored.subscribe(emitted.append)
    changes = restored.replace_all(engine, restored.write_token())

    primary = [(c.kind, c.action, c.id) for c in changes if c.action is not Action.REF_CHANGED]
    assert sorted(primary, key=str) == sorted([(K.CONFIG, Action.REMOVE, CFG_OTHER),
                                               (K.SECRET, Action.CREATE, "secnew" + "0" * 19),
                                               (K.SERVICE, Action.UPDATE, SVC_MONITOR)], key=str)
    assert [c.seq for c in changes] == list(range(last + 1, last + 1 + len(changes)))
    assert emitted == [changes]
    assert restored.freshness.synced
    assert restored.history.since(last - 1) == [ring[-1], *changes]   # no hole across the restart
    assert restored.get(K.SECRET, SEC_OTHER) is not None


def test_an_unchanged_engine_yields_no_changes_after_restore() -> None:
    objects = cluster()
    lived, ring = _persisted(objects)
    snapshot = {kind: [e.raw for e in lived.entries(kind)] for kind in ResourceKind if kind is not K.STACK}
    restored = Cache()
    restored.restore(_entries(snapshot), ring, lived.history.last_seq)
    assert restored.replace_all(copy.deepcopy(snapshot), restored.write_token()) == []
    assert restored.history.last_seq == lived.history.last_seq


def test_restore_needs_an_empty_cache() -> None:
    cache = Cache()
    cache.replace_all(cluster())
    with pytest.raises(ValueError, match="empty cache"):
        cache.restore([], [], 0)
    used = Cache()
    used.write_token()
    with pytest.raises(ValueError, match="empty cache"):
        used.restore([], [], 0)


def test_derived_kinds_are_not_restored() -> None:
    stack = build_entry(K.STACK, {"name": "shop", "services": []})
    with pytest.raises(ValueError, match="derived"):
        Cache().restore([stack], [], 0)


def test_ref_changed_times_come_back_for_objects_that_still_exist() -> None:
    history = History()
    config = history.record(K.CONFIG, Action.REF_CHANGED, CFG_SHOP, "shop_nginx", None, None)
    cache = Cache()
    cache.restore(_entries(cluster()), [config], config.seq)
    assert cache.ref_changed_at(K.CONFIG, CFG_SHOP) == config.timestamp


# --------------------------------------------------------------------------- History.restore
def _records(first: int, last: int) -> list[Change]:
    return [Change(seq, K.CONFIG, Action.UPDATE, "c", "c", float(seq)) for seq in range(first, last + 1)]


def test_history_restore_continues_the_sequence() -> None:
    history = History(capacity=10)
    history.restore(_records(5, 9), 9)
    assert (history.oldest_seq, history.last_seq, len(history)) == (5, 9, 5)
    assert history.record(K.CONFIG, Action.UPDATE, "c", "c", None, None).seq == 10
    assert [c.seq for c in history.since(7) or []] == [8, 9, 10]
    assert history.get(6) is not None and history.get(6).seq == 6  # type: ignore[union-attr]


def test_history_restore_keeps_the_bounds_and_every_record_across_a_gap() -> None:
    history = History(capacity=3)
    history.restore(_records(1, 4) + _records(6, 9), 9)
    assert [c.seq for c in history.newest_first()] == [9, 8, 7]
    holey = History(capacity=10)
    holey.restore(_records(1, 4) + _records(6, 9), 9)
    assert [c.seq for c in holey.newest_first()] == [9, 8, 7, 6, 4, 3, 2, 1]
    assert [c.seq for c in holey.since(3) or []] == [4, 6, 7, 8, 9]   # across the gap: what was committed


def _gapped() -> History:
    """Records 1-4 committed, an unclean stop, numbering continued past a gap at 100 (records 101-103)."""
    history = History(capacity=100)
    history.restore(_records(1, 4), 100)
    for _ in range(3):
        history.record(K.CONFIG, Action.UPDATE, "c", "c", None, None)
    return history


@pytest.mark.parametrize(("position", "expected"), [
    (0, [1, 2, 3, 4, 101, 102, 103]),   # just before the oldest record
    (2, [3, 4, 101, 102, 103]),
    (4, [101, 102, 103]),               # the committed end: the records after the gap
    (5, None), (50, None), (99, None),  # inside the gap: numbers the dead process may have sent
    (100, [101, 102, 103]),             # where this process's numbering started
    (102, [103]), (103, []),
    (104, None), (10**15, None),        # ahead
    (-1, None),                          # older than the ring
])
def test_since_serves_every_position_of_a_gapped_sequence_and_nothing_inside_the_gap(
        position: int, expected: list[int] | None) -> None:
    missed = _gapped().since(position)
    assert (None if missed is None else [c.seq for c in missed]) == expected


def test_paging_and_lookup_find_records_on_both_sides_of_a_gap() -> None:
    history = _gapped()
    assert history.has_holes
    assert [c.seq for c in history.newest_first(before=102)] == [101, 4, 3, 2, 1]
    assert [c.seq for c in history.newest_first(before=100)] == [4, 3, 2, 1]
    assert [c.seq for c in history.newest_first(before=3)] == [2, 1]
    assert [c.seq for c in history.newest_first(before=1)] == []
    assert [c.seq for c in history.newest_first(before=10**15)] == [103, 102, 101, 4, 3, 2, 1]
    found = [history.get(seq) for seq in (1, 4, 5, 100, 101, 103, 104)]
    assert [None if c is None else c.seq for c in found] == [1, 4, None, None, 101, 103, None]


def test_a_trimmed_gap_leaves_a_consecutive_ring() -> None:
    history = History(capacity=3)
    history.restore(_records(1, 4), 100)
    for _ in range(3):
        history.record(K.CONFIG, Action.UPDATE, "c", "c", None, None)
    assert not history.has_holes and history.since(4) is None and history.since(100) is not None


def test_history_restore_keeps_records_that_end_before_the_sequence_and_drops_those_past_it() -> None:
    history = History()
    history.restore(_records(1, 4), 7)       # 7: the end of a gap recorded at a restart
    assert (len(history), history.last_seq, history.since(7), history.since(4)) == (4, 7, [], [])
    assert history.since(5) is None and history.since(6) is None
    later = History()
    later.restore(_records(1, 9), 7)         # past the committed sequence: never trusted
    assert (later.oldest_seq, len(later), later.record(K.CONFIG, Action.UPDATE, "c", "c", None, None).seq) \
        == (1, 7, 8)


def test_sequence_base_is_microseconds_and_exact_in_javascript() -> None:
    base = sequence_base(1_800_000_000.5)
    assert base == 1_800_000_000_500_000 and base < 2**53
    assert sequence_base() > sequence_base(1_700_000_000)


def test_history_restore_refuses_a_used_ring() -> None:
    history = History()
    history.record(K.CONFIG, Action.CREATE, "c", "c", None, None)
    with pytest.raises(ValueError):
        history.restore([], 5)
