"""Cache: changes and their sequence numbers, full-sync diffs, indexes, derived stacks, redaction, memos,
and the History ring."""

from __future__ import annotations

import pytest

from app.cache.history import Action, Change, History
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def summary(changes: list[Change]) -> set[tuple[ResourceKind, Action, str]]:
    return {(change.kind, change.action, change.id) for change in changes}


def ids(entries: list) -> list[str]:  # type: ignore[type-arg]
    return [entry.id for entry in entries]


# --------------------------------------------------------------------------- upsert / remove
def test_upsert_of_a_new_object_records_a_create_change() -> None:
    cache = Cache()
    changes = cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "manager-1"))
    assert [(c.kind, c.action, c.id, c.name) for c in changes] == [
        (K.NODE, Action.CREATE, o.NODE_MANAGER, "manager-1")]
    assert changes[0].before is None
    assert changes[0].after is not None and changes[0].after["ID"] == o.NODE_MANAGER
    assert cache.get(K.NODE, o.NODE_MANAGER) is not None


def test_upsert_with_a_new_version_records_an_update_with_before_and_after() -> None:
    cache = Cache()
    cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "manager-1", version=10))
    changes = cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "manager-1", availability="drain", version=11))
    assert summary(changes) == {(K.NODE, Action.UPDATE, o.NODE_MANAGER)}
    assert changes[0].before is not None and changes[0].before["Spec"]["Availability"] == "active"
    assert changes[0].after is not None and changes[0].after["Spec"]["Availability"] == "drain"
    entry = cache.get(K.NODE, o.NODE_MANAGER)
    assert entry is not None and entry.activation["availability"] == "drain"


def test_upsert_with_an_unchanged_version_index_records_nothing() -> None:
    cache = Cache()
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", version=7))
    seq = cache.freshness.seq
    assert cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", version=7)) == []
    assert cache.freshness.seq == seq


def test_upsert_of_identical_unversioned_json_records_nothing() -> None:
    cache = Cache()
    cache.upsert(K.VOLUME, o.volume("data"))
    assert cache.upsert(K.VOLUME, o.volume("data")) == []
    changed = cache.upsert(K.VOLUME, o.volume("data", driver="nfs"))
    assert summary(changed) == {(K.VOLUME, Action.UPDATE, "data")}


def test_remove_records_a_remove_change_and_forgets_the_object() -> None:
    cache = Cache()
    cache.upsert(K.CONFIG, o.config(o.CFG_OTHER, "app_settings"))
    changes = cache.remove(K.CONFIG, o.CFG_OTHER)
    assert [(c.action, c.id, c.name) for c in changes] == [(Action.REMOVE, o.CFG_OTHER, "app_settings")]
    assert changes[0].after is None and changes[0].before is not None
    assert cache.get(K.CONFIG, o.CFG_OTHER) is None
    assert cache.count(K.CONFIG) == 0


def test_remove_of_an_unknown_object_records_nothing() -> None:
    cache = Cache()
    assert cache.remove(K.TASK, "missing") == []
    assert cache.freshness.seq == 0


def test_sequence_numbers_increase_by_one_per_change() -> None:
    cache = Cache()
    seen = []
    seen += cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=1))
    seen += cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=2))
    seen += cache.upsert(K.CONFIG, o.config(o.CFG_OTHER, "c"))
    seen += cache.remove(K.NODE, o.NODE_MANAGER)
    assert [c.seq for c in seen] == [1, 2, 3, 4]
    assert cache.freshness.seq == 4
    assert cache.history.last_seq == 4


def test_listeners_receive_each_batch_and_can_unsubscribe() -> None:
    cache = Cache()
    batches: list[list[Change]] = []
    unsubscribe = cache.subscribe(batches.append)
    cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m"))
    cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m"))  # unchanged: no batch
    assert [len(batch) for batch in batches] == [1]
    unsubscribe()
    cache.remove(K.NODE, o.NODE_MANAGER)
    assert len(batches) == 1


# --------------------------------------------------------------------------- full sync
def test_replace_all_on_an_empty_cache_creates_everything_and_marks_synced(objects) -> None:  # type: ignore[no-untyped-def]
    cache = Cache()
    assert not cache.freshness.synced
    changes = cache.replace_all(objects, cache.write_token(), 0.25)
    engine_objects = sum(len(raws) for raws in objects.values())
    creates = [c for c in changes if c.kind is not K.STACK]
    assert len(creates) == engine_objects
    assert {c.action for c in creates} == {Action.CREATE}
    assert (K.STACK, Action.CREATE, "shop") in summary(changes)
    fresh = cache.freshness
    assert fresh.synced and not fresh.connected  # only the event stream makes the cache live
    assert fresh.last_sync is not None and fresh.last_contact is not None
    assert fresh.last_sync_duration == 0.25
    for kind, raws in objects.items():
        assert cache.count(kind) == len(raws), kind


def test_a_full_sync_records_one_change_per_derived_stack(objects) -> None:  # type: ignore[no-untyped-def]
    """The stack is created once with all its members, not once per member kind (no transient states)."""
    cache = Cache()
    changes = cache.replace_all(objects)
    stack_changes = [(c.action, c.after) for c in changes if c.kind is K.STACK]
    assert stack_changes == [(Action.CREATE, {
        "name": "shop", "services": sorted([o.SVC_WEB, o.SVC_DB]), "configs": [o.CFG_SHOP],
        "secrets": [o.SEC_SHOP], "networks": [o.NET_SHOP], "volumes": [o.VOL_SHOP]})]


def test_replace_all_diffs_against_the_previous_state(synced_cache: Cache) -> None:
    fresh = o.cluster()
    fresh[K.CONFIG] = [raw for raw in fresh[K.CONFIG] if raw["ID"] != o.CFG_OTHER]          # removed
    fresh[K.NODE][1] = o.node(o.NODE_WORKER, "worker-1", availability="pause", version=11)  # updated
    fresh[K.VOLUME].append(o.volume("new_volume"))                                         # created
    changes = synced_cache.replace_all(fresh)
    assert summary(changes) == {
        (K.CONFIG, Action.REMOVE, o.CFG_OTHER),
        (K.NODE, Action.UPDATE, o.NODE_WORKER),
        (K.VOLUME, Action.CREATE, "new_volume"),
    }
    assert synced_cache.get(K.CONFIG, o.CFG_OTHER) is None
    assert synced_cache.get(K.VOLUME, "new_volume") is not None


def test_replace_all_with_the_same_listing_produces_no_changes(synced_cache: Cache) -> None:
    seq = synced_cache.freshness.seq
    assert synced_cache.replace_all(o.cluster()) == []
    assert synced_cache.freshness.seq == seq


def test_replace_all_swaps_the_whole_state_and_drops_derived_stacks(synced_cache: Cache) -> None:
    changes = synced_cache.replace_all({})
    for kind in ResourceKind:
        assert synced_cache.count(kind) == 0, kind
    assert (K.STACK, Action.REMOVE, "shop") in summary(changes)
    assert synced_cache.tasks_of_service(o.SVC_WEB) == []
    assert synced_cache.services_using(K.CONFIG, o.CFG_SHOP) == []


def test_apply_listing_reconciles_one_kind_only(synced_cache: Cache) -> None:
    tasks = [o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, state="failed", version=31),
             o.task("newtask", o.SVC_WEB, o.NODE_WORKER, slot=3)]
    changes = synced_cache.apply_listing(K.TASK, tasks, synced_cache.write_token()) or []
    assert {(c.action, c.id) for c in changes if c.action is not Action.REF_CHANGED} == {
        (Action.UPDATE, o.TASK_WEB_1), (Action.CREATE, "newtask"),
        *((Action.REMOVE, t) for t in (o.TASK_WEB_2, o.TASK_DB_1, o.TASK_DB_OLD, o.TASK_MON_MANAGER,
                                       o.TASK_MON_WORKER, o.TASK_MON_DOWN))}
    assert {c.kind for c in changes if c.action is not Action.REF_CHANGED} == {K.TASK}
    assert synced_cache.count(K.SERVICE) == 3


# --------------------------------------------------------------------------- indexes
def test_tasks_are_indexed_by_service_and_by_node(synced_cache: Cache) -> None:
    assert ids(synced_cache.tasks_of_service(o.SVC_WEB)) == sorted([o.TASK_WEB_1, o.TASK_WEB_2])
    assert set(ids(synced_cache.tasks_of_service(o.SVC_DB))) == {o.TASK_DB_1, o.TASK_DB_OLD}
    on_worker = {o.TASK_WEB_2, o.TASK_DB_1, o.TASK_MON_WORKER}
    assert set(ids(synced_cache.tasks_of_node(o.NODE_WORKER))) == on_worker
    assert synced_cache.tasks_of_service("no-such-service") == []


def test_a_task_moving_to_another_node_moves_in_the_node_index(synced_cache: Cache) -> None:
    synced_cache.upsert(K.TASK, o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_WORKER, version=99))
    assert o.TASK_WEB_1 not in ids(synced_cache.tasks_of_node(o.NODE_MANAGER))
    assert o.TASK_WEB_1 in ids(synced_cache.tasks_of_node(o.NODE_WORKER))
    synced_cache.remove(K.TASK, o.TASK_WEB_1)
    assert o.TASK_WEB_1 not in ids(synced_cache.tasks_of_node(o.NODE_WORKER))
    assert ids(synced_cache.tasks_of_service(o.SVC_WEB)) == [o.TASK_WEB_2]


@pytest.mark.parametrize(("kind", "object_id", "expected"), [
    (K.CONFIG, o.CFG_SHOP, {o.SVC_WEB}),
    (K.CONFIG, o.CFG_OTHER, {o.SVC_MONITOR}),
    (K.SECRET, o.SEC_SHOP, {o.SVC_WEB, o.SVC_DB}),
    (K.SECRET, o.SEC_OTHER, set()),
    (K.NETWORK, o.NET_SHOP, {o.SVC_WEB, o.SVC_DB}),
    (K.NETWORK, o.NET_INGRESS, {o.SVC_MONITOR}),
    (K.NETWORK, o.NET_BRIDGE, set()),
    (K.VOLUME, o.VOL_SHOP, {o.SVC_WEB}),
    (K.VOLUME, o.VOL_OTHER, set()),
])
def test_services_using_a_referenced_object(synced_cache: Cache, kind: ResourceKind, object_id: str,
                                            expected: set[str]) -> None:
    assert set(ids(synced_cache.services_using(kind, object_id))) == expected


def test_bind_mounts_are_not_volume_references(synced_cache: Cache) -> None:
    assert synced_cache.services_using(K.VOLUME, "/var/run") == []


def test_a_service_dropping_a_reference_leaves_the_reference_index(synced_cache: Cache) -> None:
    synced_cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "shop_web_api", stack="shop", networks=(o.NET_SHOP,),
                                             version=21))
    assert o.SVC_WEB not in ids(synced_cache.services_using(K.CONFIG, o.CFG_SHOP))
    assert o.SVC_WEB not in ids(synced_cache.services_using(K.VOLUME, o.VOL_SHOP))
    assert ids(synced_cache.services_using(K.SECRET, o.SEC_SHOP)) == [o.SVC_DB]
    synced_cache.remove(K.SERVICE, o.SVC_DB)
    assert synced_cache.services_using(K.SECRET, o.SEC_SHOP) == []


# --------------------------------------------------------------------------- stacks
def stack_raw(cache: Cache, name: str) -> dict | None:  # type: ignore[type-arg]
    entry = cache.get(K.STACK, name)
    return None if entry is None else entry.raw


def test_a_stack_appears_with_its_first_labelled_service() -> None:
    cache = Cache()
    changes = cache.upsert(K.CONFIG, o.config(o.CFG_SHOP, "shop_nginx", stack="shop"))
    assert summary(changes) == {(K.CONFIG, Action.CREATE, o.CFG_SHOP)}
    assert cache.get(K.STACK, "shop") is None  # members alone do not make a stack
    changes = cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "shop_web_api", stack="shop"))
    assert summary(changes) == {(K.SERVICE, Action.CREATE, o.SVC_WEB), (K.STACK, Action.CREATE, "shop")}
    assert stack_raw(cache, "shop") == {"name": "shop", "services": [o.SVC_WEB], "configs": [o.CFG_SHOP],
                                        "secrets": [], "networks": [], "volumes": []}


def test_a_stack_gains_members_with_an_update_change() -> None:
    cache = Cache()
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "shop_web_api", stack="shop"))
    expectations = [
        (K.SERVICE, o.service(o.SVC_DB, "shop_db", stack="shop"), "services", [o.SVC_DB, o.SVC_WEB]),
        (K.CONFIG, o.config(o.CFG_SHOP, "shop_nginx", stack="shop"), "configs", [o.CFG_SHOP]),
        (K.SECRET, o.secret(o.SEC_SHOP, "pw", stack="shop"), "secrets", [o.SEC_SHOP]),
        (K.NETWORK, o.network(o.NET_SHOP, "shop_default", stack="shop"), "networks", [o.NET_SHOP]),
        (K.VOLUME, o.volume(o.VOL_SHOP, stack="shop"), "volumes", [o.VOL_SHOP]),
    ]
    for kind, raw, member, expected in expectations:
        changes = cache.upsert(kind, raw)
        assert (K.STACK, Action.UPDATE, "shop") in summary(changes), member
        stack = stack_raw(cache, "shop")
        assert stack is not None and sorted(stack[member]) == sorted(expected), member
    entry = cache.get(K.STACK, "shop")
    assert entry is not None
    assert entry.activation == {"name": "shop", "services": 2, "configs": 1, "secrets": 1, "networks": 1,
                                "volumes": 1}


def test_unlabelled_objects_do_not_join_a_stack(synced_cache: Cache) -> None:
    stack = stack_raw(synced_cache, "shop")
    assert stack == {"name": "shop", "services": sorted([o.SVC_WEB, o.SVC_DB]), "configs": [o.CFG_SHOP],
                     "secrets": [o.SEC_SHOP], "networks": [o.NET_SHOP], "volumes": [o.VOL_SHOP]}
    assert synced_cache.count(K.STACK) == 1


def test_a_service_update_that_keeps_membership_does_not_update_the_stack(synced_cache: Cache) -> None:
    changes = synced_cache.upsert(K.SERVICE, o.service(o.SVC_DB, "shop_db", stack="shop", version=99))
    # The stack's own object (its member lists) is unchanged; its detail embeds the service, hence the ref
    # (the new spec also stops using the secret and the network, whose details list the service).
    assert summary(changes) == {(K.SERVICE, Action.UPDATE, o.SVC_DB), (K.STACK, Action.REF_CHANGED, "shop"),
                                (K.SECRET, Action.REF_CHANGED, o.SEC_SHOP),
                                (K.NETWORK, Action.REF_CHANGED, o.NET_SHOP)}


def test_a_stack_disappears_with_its_last_service(synced_cache: Cache) -> None:
    first = synced_cache.remove(K.SERVICE, o.SVC_DB)
    assert (K.STACK, Action.UPDATE, "shop") in summary(first)
    last = synced_cache.remove(K.SERVICE, o.SVC_WEB)
    assert (K.STACK, Action.REMOVE, "shop") in summary(last)
    assert synced_cache.get(K.STACK, "shop") is None
    assert synced_cache.count(K.STACK) == 0
    # The labelled config, secret, network and volume remain cached on their own.
    assert synced_cache.get(K.CONFIG, o.CFG_SHOP) is not None


def test_a_stack_comes_back_with_its_remaining_members(synced_cache: Cache) -> None:
    synced_cache.remove(K.SERVICE, o.SVC_DB)
    synced_cache.remove(K.SERVICE, o.SVC_WEB)
    changes = synced_cache.upsert(K.SERVICE, o.service(o.SVC_DB, "shop_db", stack="shop"))
    assert (K.STACK, Action.CREATE, "shop") in summary(changes)
    stack = stack_raw(synced_cache, "shop")
    assert stack is not None and stack["configs"] == [o.CFG_SHOP] and stack["volumes"] == [o.VOL_SHOP]


def test_relabelling_a_service_moves_it_between_stacks() -> None:
    cache = Cache()
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", stack="blue", version=1))
    changes = cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", stack="green", version=2))
    assert summary(changes) == {(K.SERVICE, Action.UPDATE, o.SVC_WEB), (K.STACK, Action.REMOVE, "blue"),
                                (K.STACK, Action.CREATE, "green")}
    assert [e.id for e in cache.entries(K.STACK)] == ["green"]


def test_stack_changes_follow_their_cause_in_sequence(synced_cache: Cache) -> None:
    changes = synced_cache.remove(K.SERVICE, o.SVC_DB)
    assert [(c.kind, c.action) for c in changes][:2] == [(K.SERVICE, Action.REMOVE), (K.STACK, Action.UPDATE)]
    assert changes[1].seq == changes[0].seq + 1
    assert {c.action for c in changes[2:]} == {Action.REF_CHANGED}


def test_stack_members_lists_member_entries(synced_cache: Cache) -> None:
    assert ids(synced_cache.stack_members("shop", K.SERVICE)) == [o.SVC_DB, o.SVC_WEB]  # by name
    assert ids(synced_cache.stack_members("shop", K.VOLUME)) == [o.VOL_SHOP]
    assert synced_cache.stack_members("nope", K.SERVICE) == []


# --------------------------------------------------------------------------- redaction
def test_secret_data_is_never_stored() -> None:
    cache = Cache()
    raw = o.secret(o.SEC_SHOP, "pw", stack="shop")
    changes = cache.upsert(K.SECRET, raw)
    entry = cache.get(K.SECRET, o.SEC_SHOP)
    assert entry is not None
    assert "Data" not in entry.raw["Spec"]
    assert entry.raw["Spec"]["Name"] == "pw"
    assert changes[0].after is not None and "Data" not in changes[0].after["Spec"]
    assert raw["Spec"]["Data"] == o.SECRET_DATA  # the caller's dict is not mutated


def test_secret_data_is_absent_from_every_change_record(synced_cache: Cache) -> None:
    synced_cache.upsert(K.SECRET, o.secret(o.SEC_SHOP, "shop_db_password", stack="shop", version=51))
    synced_cache.remove(K.SECRET, o.SEC_SHOP)
    records = list(synced_cache.history.newest_first())
    assert any(c.kind is K.SECRET for c in records)
    assert o.SECRET_DATA not in repr([(c.before, c.after) for c in records])


def test_config_data_is_kept() -> None:
    cache = Cache()
    cache.upsert(K.CONFIG, o.config(o.CFG_SHOP, "shop_nginx"))
    entry = cache.get(K.CONFIG, o.CFG_SHOP)
    assert entry is not None and entry.raw["Spec"]["Data"] == o.CONFIG_DATA


# --------------------------------------------------------------------------- memoised lists
def test_sorted_entries_are_memoised_until_the_kind_changes(synced_cache: Cache) -> None:
    first = synced_cache.sorted_entries(K.SERVICE, "name")
    assert [e.name for e in first] == ["monitor", "shop_db", "shop_web_api"]
    assert synced_cache.sorted_entries(K.SERVICE, "name") is first
    synced_cache.upsert(K.NODE, o.node("another", "another"))  # another kind: memo kept
    assert synced_cache.sorted_entries(K.SERVICE, "name") is first
    synced_cache.upsert(K.SERVICE, o.service("aaa", "alpha"))
    again = synced_cache.sorted_entries(K.SERVICE, "name")
    assert again is not first
    assert [e.name for e in again] == ["alpha", "monitor", "shop_db", "shop_web_api"]


def test_entries_list_is_invalidated_by_update_and_remove(synced_cache: Cache) -> None:
    before = synced_cache.entries(K.CONFIG)
    assert synced_cache.entries(K.CONFIG) is before
    synced_cache.upsert(K.CONFIG, o.config(o.CFG_OTHER, "renamed", version=41))
    updated = synced_cache.entries(K.CONFIG)
    assert updated is not before
    assert "renamed" in [e.name for e in updated]
    sorted_before = synced_cache.sorted_entries(K.CONFIG, "name")
    synced_cache.remove(K.CONFIG, o.CFG_OTHER)
    assert [e.id for e in synced_cache.sorted_entries(K.CONFIG, "name")] == [o.CFG_SHOP]
    assert len(sorted_before) == 2


def test_sorted_entries_of_stacks_follow_stack_changes(synced_cache: Cache) -> None:
    assert [e.id for e in synced_cache.sorted_entries(K.STACK, "name")] == ["shop"]
    synced_cache.upsert(K.SERVICE, o.service("x1", "alpha_x", stack="alpha"))
    assert [e.id for e in synced_cache.sorted_entries(K.STACK, "name")] == ["alpha", "shop"]


def test_entries_keep_engine_listing_order(synced_cache: Cache) -> None:
    assert ids(synced_cache.entries(K.SERVICE)) == [o.SVC_WEB, o.SVC_DB, o.SVC_MONITOR]


# --------------------------------------------------------------------------- history ring
def _fill(history: History, count: int) -> None:
    for index in range(count):
        history.record(K.NODE, Action.UPDATE, f"n{index}", f"n{index}", None, None)


def test_history_since_on_an_empty_ring_is_empty() -> None:
    history = History(5)
    assert history.since(0) == []
    assert history.oldest_seq is None
    assert len(history) == 0


def test_history_since_returns_the_changes_after_a_sequence() -> None:
    history = History(10)
    _fill(history, 4)
    assert [c.seq for c in history.since(0) or []] == [1, 2, 3, 4]
    assert [c.seq for c in history.since(2) or []] == [3, 4]
    assert history.since(4) == []


def test_history_since_ahead_of_the_last_sequence_is_none() -> None:
    history = History(10)
    _fill(history, 3)
    assert history.since(4) is None
    assert History(10).since(1) is None


def test_history_since_a_sequence_that_fell_out_of_the_ring_is_none() -> None:
    history = History(3)
    _fill(history, 6)  # keeps 4, 5, 6
    assert history.oldest_seq == 4
    assert len(history) == 3
    assert [c.seq for c in history.since(3) or []] == [4, 5, 6]  # nothing missed yet
    assert history.since(2) is None                              # 3 was dropped
    assert history.since(0) is None


def test_history_newest_first_is_reverse_sequence_order() -> None:
    history = History(10)
    _fill(history, 3)
    assert [c.seq for c in history.newest_first()] == [3, 2, 1]


def test_cache_history_capacity_bounds_the_ring() -> None:
    cache = Cache(history_capacity=4)
    for version in range(1, 11):
        cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "m", version=version))
    assert len(cache.history) == 4
    assert cache.history.last_seq == 10
    assert cache.history.since(5) is None
    assert [c.seq for c in cache.history.since(6) or []] == [7, 8, 9, 10]
