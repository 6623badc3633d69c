"""Late and reordered engine answers (docs/cache-exactness.md): tokens, Version.Index, tombstones and listing scopes.

Each test replays an interleaving the watcher can produce (an engine call starts, takes its token, and
answers after other answers were applied) directly on the cache, so the outcome does not depend on timing.
"""

from __future__ import annotations

import pytest

from app.cache.history import Action
from app.cache.store import Cache, InspectOutcome
from app.cache.tombstones import Tombstones
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
APPLIED, UNCHANGED, STALE = InspectOutcome.APPLIED, InspectOutcome.UNCHANGED, InspectOutcome.STALE


def story(cache: Cache, since: int = 0) -> list[tuple[ResourceKind, Action, str]]:
    """The primary change records after ``since`` (ref_changed left out), oldest first."""
    return [(c.kind, c.action, c.id) for c in cache.history.since(since) or []
            if c.action is not Action.REF_CHANGED and c.kind is not K.STACK]


def version_of(cache: Cache, kind: ResourceKind, object_id: str) -> int | None:
    entry = cache.get(kind, object_id)
    return None if entry is None else entry.version


def web_tasks(state: str, version: int) -> list[dict]:  # type: ignore[type-arg]
    return [o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, slot=1, state=state, version=version),
            o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, state=state, version=version)]


# --------------------------------------------------------------------------- inspects
def test_update_then_slow_inspect_then_remove_does_not_resurrect(synced_cache: Cache) -> None:
    """An update event whose inspect is slow, then a remove: the late answer must not win."""
    cache, start = synced_cache, synced_cache.history.last_seq
    slow_token = cache.write_token()                                     # update event: inspect starts
    slow_answer = o.service(o.SVC_MONITOR, "monitor", replicas=None, version=21)
    remove_token = cache.write_token()                                   # remove event: inspect starts
    assert cache.apply_inspect(K.SERVICE, o.SVC_MONITOR, None, remove_token) is APPLIED
    assert cache.apply_inspect(K.SERVICE, o.SVC_MONITOR, slow_answer, slow_token) is STALE
    assert cache.get(K.SERVICE, o.SVC_MONITOR) is None
    assert story(cache, start) == [(K.SERVICE, Action.REMOVE, o.SVC_MONITOR)]


def test_a_late_answer_for_an_unversioned_object_does_not_undo_its_removal(synced_cache: Cache) -> None:
    cache = synced_cache
    slow_token = cache.write_token()
    assert cache.apply_inspect(K.VOLUME, o.VOL_OTHER, None, cache.write_token()) is APPLIED
    assert cache.apply_inspect(K.VOLUME, o.VOL_OTHER, o.volume(o.VOL_OTHER, driver="nfs"), slow_token) is STALE
    assert cache.get(K.VOLUME, o.VOL_OTHER) is None


def test_an_older_version_index_never_replaces_a_newer_one(synced_cache: Cache) -> None:
    cache = synced_cache
    first, second = cache.write_token(), cache.write_token()   # two inspects of one object in flight
    newer = o.node(o.NODE_WORKER, "worker-1", availability="drain", version=12)
    older = o.node(o.NODE_WORKER, "worker-1", availability="pause", version=11)
    assert cache.apply_inspect(K.NODE, o.NODE_WORKER, newer, second) is APPLIED
    seq = cache.history.last_seq
    assert cache.apply_inspect(K.NODE, o.NODE_WORKER, older, first) is STALE
    assert version_of(cache, K.NODE, o.NODE_WORKER) == 12
    assert cache.history.last_seq == seq


def test_a_newer_version_applies_even_when_the_object_was_written_after_the_token(synced_cache: Cache) -> None:
    """Version.Index is the engine's own order: a higher one is newer, whoever asked first."""
    cache = synced_cache
    token = cache.write_token()
    cache.apply_inspect(K.NODE, o.NODE_WORKER, o.node(o.NODE_WORKER, "worker-1", version=12), cache.write_token())
    assert cache.apply_inspect(K.NODE, o.NODE_WORKER, o.node(o.NODE_WORKER, "worker-1", version=13),
                               token) is APPLIED
    assert version_of(cache, K.NODE, o.NODE_WORKER) == 13


def test_an_equal_answer_is_unchanged_and_records_nothing(synced_cache: Cache) -> None:
    cache = synced_cache
    seq, token = cache.history.last_seq, cache.write_token()
    assert cache.apply_inspect(K.SERVICE, o.SVC_WEB, o.cluster()[K.SERVICE][0], token) is UNCHANGED
    assert cache.apply_inspect(K.NETWORK, o.NET_BRIDGE, o.cluster()[K.NETWORK][2], token) is UNCHANGED
    assert cache.apply_inspect(K.TASK, "never-seen", None, token) is UNCHANGED
    assert cache.history.last_seq == seq


def test_an_unversioned_object_written_after_the_token_is_left_alone(synced_cache: Cache) -> None:
    cache = synced_cache
    slow_token = cache.write_token()
    newer = o.network(o.NET_BRIDGE, "bridge", driver="bridge", scope="local", created="2024-06-01T00:00:00Z")
    assert cache.apply_inspect(K.NETWORK, o.NET_BRIDGE, newer, cache.write_token()) is APPLIED
    older = o.network(o.NET_BRIDGE, "bridge", driver="bridge", scope="local")
    assert cache.apply_inspect(K.NETWORK, o.NET_BRIDGE, older, slow_token) is STALE
    entry = cache.get(K.NETWORK, o.NET_BRIDGE)
    assert entry is not None and entry.raw["Created"] == "2024-06-01T00:00:00Z"


def test_a_late_not_found_does_not_remove_an_object_recreated_since(synced_cache: Cache) -> None:
    cache = synced_cache
    slow_token = cache.write_token()                                  # inspect starts: engine says NotFound
    cache.apply_inspect(K.VOLUME, o.VOL_OTHER, None, cache.write_token())
    assert cache.apply_inspect(K.VOLUME, o.VOL_OTHER, o.volume(o.VOL_OTHER), cache.write_token()) is APPLIED
    assert cache.apply_inspect(K.VOLUME, o.VOL_OTHER, None, slow_token) is STALE
    assert cache.get(K.VOLUME, o.VOL_OTHER) is not None


def test_a_late_not_found_does_not_remove_an_object_updated_since(synced_cache: Cache) -> None:
    cache = synced_cache
    slow_token = cache.write_token()
    cache.apply_inspect(K.CONFIG, o.CFG_OTHER, o.config(o.CFG_OTHER, "app_settings", version=41),
                        cache.write_token())
    assert cache.apply_inspect(K.CONFIG, o.CFG_OTHER, None, slow_token) is STALE
    assert cache.apply_inspect(K.CONFIG, o.CFG_OTHER, None, cache.write_token()) is APPLIED
    assert cache.get(K.CONFIG, o.CFG_OTHER) is None


def test_a_removed_object_can_come_back_through_an_answer_that_started_after_the_removal(
        synced_cache: Cache) -> None:
    cache = synced_cache
    cache.apply_inspect(K.VOLUME, o.VOL_OTHER, None, cache.write_token())
    assert cache.apply_inspect(K.VOLUME, o.VOL_OTHER, o.volume(o.VOL_OTHER), cache.write_token()) is APPLIED
    assert cache.get(K.VOLUME, o.VOL_OTHER) is not None


# --------------------------------------------------------------------------- listings
def test_an_older_task_listing_after_a_newer_one_is_not_applied(synced_cache: Cache) -> None:
    """Task states must not go backwards, unchanged tasks must not be removed and re-created."""
    cache = synced_cache
    old_token = cache.write_token()                       # a full sync lists tasks...
    old_listing = o.cluster()[K.TASK]
    new_token = cache.write_token()                        # ...the 1 s reconciliation lists them again
    new_listing = o.cluster()[K.TASK][2:] + web_tasks("failed", 31)
    new_listing.append(o.task("scaledup", o.SVC_WEB, o.NODE_WORKER, slot=3))
    start = cache.history.last_seq
    assert cache.apply_listing(K.TASK, new_listing, new_token) is not None
    after_new = story(cache, start)
    assert cache.apply_listing(K.TASK, old_listing, old_token) is None
    assert story(cache, start) == after_new
    assert version_of(cache, K.TASK, o.TASK_WEB_1) == 31
    assert cache.get(K.TASK, "scaledup") is not None


def test_a_full_sync_older_than_an_applied_service_listing_changes_nothing_it_covers(
        synced_cache: Cache) -> None:
    cache = synced_cache
    sync_token = cache.write_token()                      # full sync starts listing every kind
    stale_snapshot = o.cluster()
    service_token = cache.write_token()                   # per-service task listing of web
    fresh_web = [o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, state="failed", version=31),
                 o.task("scaledup", o.SVC_WEB, o.NODE_WORKER, slot=3, version=32)]   # web.2 is gone
    start = cache.history.last_seq
    assert cache.apply_listing(K.TASK, fresh_web, service_token, service_id=o.SVC_WEB) is not None
    assert story(cache, start) == [(K.TASK, Action.REMOVE, o.TASK_WEB_2), (K.TASK, Action.UPDATE, o.TASK_WEB_1),
                                   (K.TASK, Action.CREATE, "scaledup")]
    middle = cache.history.last_seq
    cache.replace_all(stale_snapshot, sync_token)
    assert story(cache, middle) == []                     # no regression, no resurrection, no removal
    assert version_of(cache, K.TASK, o.TASK_WEB_1) == 31
    assert cache.get(K.TASK, o.TASK_WEB_2) is None
    assert cache.get(K.TASK, "scaledup") is not None
    assert cache.freshness.synced


def test_a_full_listing_does_not_remove_objects_created_after_its_token(synced_cache: Cache) -> None:
    cache = synced_cache
    token = cache.write_token()
    cache.apply_inspect(K.CONFIG, "newconfig", o.config("newconfig", "fresh"), cache.write_token())
    changes = cache.apply_listing(K.CONFIG, o.cluster()[K.CONFIG], token)
    assert changes == []
    assert cache.get(K.CONFIG, "newconfig") is not None


def test_a_service_listing_touches_only_that_services_tasks(synced_cache: Cache) -> None:
    cache = synced_cache
    listing = [o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, version=31),
               o.task(o.TASK_DB_1, o.SVC_DB, o.NODE_WORKER, state="failed", version=99)]  # not web's: ignored
    start = cache.history.last_seq
    assert cache.apply_listing(K.TASK, listing, cache.write_token(), service_id=o.SVC_WEB) is not None
    assert story(cache, start) == [(K.TASK, Action.REMOVE, o.TASK_WEB_2), (K.TASK, Action.UPDATE, o.TASK_WEB_1)]
    assert version_of(cache, K.TASK, o.TASK_DB_1) == 30
    assert cache.count(K.TASK) == 6


def test_a_service_listing_older_than_a_full_listing_is_dropped(synced_cache: Cache) -> None:
    cache = synced_cache
    service_token = cache.write_token()
    full_token = cache.write_token()
    assert cache.apply_listing(K.TASK, o.cluster()[K.TASK], full_token) == []
    assert cache.apply_listing(K.TASK, [], service_token, service_id=o.SVC_WEB) is None
    assert len(cache.tasks_of_service(o.SVC_WEB)) == 2


def test_service_scopes_are_independent(synced_cache: Cache) -> None:
    cache = synced_cache
    web_token = cache.write_token()
    db_token = cache.write_token()
    assert cache.apply_listing(K.TASK, web_tasks("running", 31), db_token, service_id=o.SVC_WEB) is not None
    # db's scope has seen nothing newer: an older listing of it still applies.
    changes = cache.apply_listing(K.TASK, [o.task(o.TASK_DB_1, o.SVC_DB, o.NODE_WORKER, version=30)], web_token,
                                  service_id=o.SVC_DB)
    assert changes is not None and {(c.action, c.id) for c in changes if c.kind is K.TASK} == {
        (Action.REMOVE, o.TASK_DB_OLD)}
    assert cache.apply_listing(K.TASK, web_tasks("running", 30), web_token, service_id=o.SVC_WEB) is None


def test_only_task_listings_can_be_scoped() -> None:
    with pytest.raises(ValueError):
        Cache().apply_listing(K.SERVICE, [], 0, service_id=o.SVC_WEB)


def test_stacks_are_derived_never_applied() -> None:
    with pytest.raises(ValueError):
        Cache().apply_inspect(K.STACK, "shop", None, 0)
    with pytest.raises(ValueError):
        Cache().apply_listing(K.STACK, [], 0)


def test_a_listing_with_nothing_changed_reuses_every_entry(synced_cache: Cache) -> None:
    cache = synced_cache
    before = {entry.id: entry for entry in cache.entries(K.TASK)}
    assert cache.apply_listing(K.TASK, o.cluster()[K.TASK], cache.write_token()) == []
    assert all(cache.get(K.TASK, task_id) is entry for task_id, entry in before.items())


def test_replace_all_older_than_a_kind_listing_skips_that_kind(synced_cache: Cache) -> None:
    cache = synced_cache
    sync_token = cache.write_token()
    snapshot = o.cluster()
    snapshot[K.TASK] = []                                   # would remove every task
    snapshot[K.VOLUME].append(o.volume("late_volume"))
    cache.apply_inspect(K.CONFIG, o.CFG_OTHER, o.config(o.CFG_OTHER, "x", version=41), cache.write_token())
    assert cache.apply_listing(K.TASK, o.cluster()[K.TASK], cache.write_token()) == []  # newer than the sync
    cache.replace_all(snapshot, sync_token)
    assert cache.count(K.TASK) == 7
    assert cache.get(K.VOLUME, "late_volume") is not None


# --------------------------------------------------------------------------- tombstones
def test_tombstones_are_bounded_in_count_and_raise_the_floor() -> None:
    stones = Tombstones(max_count=3, max_age=60)
    for seq in range(1, 6):
        stones.add((K.TASK, f"t{seq}"), seq)
    assert len(stones) == 3
    assert stones.removed_at((K.TASK, "t1")) is None
    assert stones.removed_at((K.TASK, "t5")) == 5
    assert stones.floor == 2


def test_tombstones_expire_by_age() -> None:
    now = [100.0]
    stones = Tombstones(max_count=100, max_age=10, clock=lambda: now[0])
    stones.add((K.TASK, "a"), 7)
    now[0] = 105.0
    stones.add((K.TASK, "b"), 8)
    now[0] = 112.0
    stones.prune()
    assert stones.removed_at((K.TASK, "a")) is None and stones.removed_at((K.TASK, "b")) == 8
    assert stones.floor == 7


def test_an_answer_older_than_a_forgotten_removal_creates_nothing() -> None:
    cache = Cache(tombstones=Tombstones(max_count=1))
    cache.upsert(K.VOLUME, o.volume("a"))
    cache.upsert(K.VOLUME, o.volume("b"))
    token = cache.write_token()
    cache.apply_inspect(K.VOLUME, "a", None, cache.write_token())
    cache.apply_inspect(K.VOLUME, "b", None, cache.write_token())   # forgets a's removal
    assert cache.apply_inspect(K.VOLUME, "a", o.volume("a"), token) is STALE
    assert cache.apply_inspect(K.VOLUME, "c", o.volume("c"), token) is STALE   # cannot tell either
    assert cache.apply_inspect(K.VOLUME, "c", o.volume("c"), cache.write_token()) is APPLIED


def test_a_re_created_object_clears_its_tombstone(synced_cache: Cache) -> None:
    cache = synced_cache
    cache.apply_inspect(K.VOLUME, o.VOL_OTHER, None, cache.write_token())
    cache.apply_inspect(K.VOLUME, o.VOL_OTHER, o.volume(o.VOL_OTHER), cache.write_token())
    assert cache._tombstones.removed_at((K.VOLUME, o.VOL_OTHER)) is None


# --------------------------------------------------------------------------- freshness
def test_contact_does_not_make_the_cache_live() -> None:
    """An inspect during backoff must not flip Cache-Freshness back to live."""
    cache = Cache()
    cache.replace_all(o.cluster(), cache.write_token())
    assert not cache.freshness.connected
    cache.set_stream_connected(True)
    assert cache.freshness.connected
    cache.mark_disconnected()
    cache.mark_contact()
    fresh = cache.freshness
    assert not fresh.connected and fresh.last_contact is not None


def test_only_the_stream_sets_connected() -> None:
    cache = Cache()
    cache.set_stream_connected(True)
    cache.replace_all({}, cache.write_token())
    assert cache.freshness.connected
    cache.set_stream_connected(False)
    cache.replace_all({}, cache.write_token())
    assert not cache.freshness.connected


def test_tokens_are_distinct_and_later_than_every_write(synced_cache: Cache) -> None:
    first = synced_cache.write_token()
    second = synced_cache.write_token()
    assert second > first
    synced_cache.apply_inspect(K.TASK, o.TASK_DB_OLD, None, synced_cache.write_token())
    assert (synced_cache._tombstones.removed_at((K.TASK, o.TASK_DB_OLD)) or 0) > second
    assert synced_cache.write_token() > (synced_cache._tombstones.removed_at((K.TASK, o.TASK_DB_OLD)) or 0)


def test_a_not_found_for_an_unknown_object_stops_an_older_answer_from_creating_it(synced_cache: Cache) -> None:
    """Created and removed in the engine before the cache saw it: the create event's inspect, which read
    the object, lands after the remove event's NotFound."""
    cache = synced_cache
    create_token = cache.write_token()
    remove_token = cache.write_token()
    assert cache.apply_inspect(K.CONFIG, "brief", None, remove_token) is UNCHANGED
    assert cache.apply_inspect(K.CONFIG, "brief", o.config("brief", "brief"), create_token) is STALE
    assert cache.get(K.CONFIG, "brief") is None
    assert cache.apply_inspect(K.CONFIG, "brief", o.config("brief", "brief"), cache.write_token()) is APPLIED
