"""ref_changed records (docs/cache-exactness.md): one per object whose representation a write changed through another
object, after the causing changes, never for an object the write changed itself."""

from __future__ import annotations

import pytest

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.query import representations
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
Key = tuple[ResourceKind, str]


def refs(changes: list[Change]) -> list[Key]:
    return [(c.kind, c.id) for c in changes if c.action is Action.REF_CHANGED]


def primary(changes: list[Change]) -> set[tuple[ResourceKind, Action, str]]:
    return {(c.kind, c.action, c.id) for c in changes if c.action is not Action.REF_CHANGED}


def task_listing(*replaced: dict) -> list[dict]:  # type: ignore[type-arg]
    """The cluster's task listing with some tasks replaced (by id) or added."""
    by_id = {raw["ID"]: raw for raw in o.cluster()[K.TASK]}
    by_id.update({raw["ID"]: raw for raw in replaced})
    return list(by_id.values())


def apply_tasks(cache: Cache, listing: list[dict]) -> list[Change]:  # type: ignore[type-arg]
    changes = cache.apply_listing(K.TASK, listing, cache.write_token())
    assert changes is not None
    return changes


def test_a_full_sync_of_an_empty_cache_records_no_ref_changed(objects) -> None:  # type: ignore[no-untyped-def]
    cache = Cache()
    assert refs(cache.replace_all(objects, cache.write_token())) == []


def test_a_task_changing_state_changes_its_service_its_node_and_the_stack() -> None:
    cache = Cache()
    cache.replace_all(o.cluster(), 0)
    changes = apply_tasks(cache, task_listing(
        o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, state="failed", version=31)))
    assert primary(changes) == {(K.TASK, Action.UPDATE, o.TASK_WEB_2)}
    assert refs(changes) == [(K.SERVICE, o.SVC_WEB), (K.NODE, o.NODE_WORKER), (K.STACK, "shop")]
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    assert all(c.before is None and c.after is None for c in changes[1:])
    assert changes[1].name == "shop_web_api" and changes[2].name == "worker-1"


def test_a_task_change_no_representation_shows_records_no_ref(synced_cache: Cache) -> None:
    changes = apply_tasks(synced_cache, task_listing(
        o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, version=31, updated="2024-05-03T00:00:00Z")))
    assert primary(changes) == {(K.TASK, Action.UPDATE, o.TASK_WEB_2)}
    assert refs(changes) == []


def test_a_state_change_outside_running_leaves_the_stack_alone(synced_cache: Cache) -> None:
    """The stack shows RunningTasks, not the tasks: pending → failed moves no count."""
    changes = apply_tasks(synced_cache, task_listing(
        o.task(o.TASK_DB_OLD, o.SVC_DB, o.NODE_DOWN, slot=1, state="rejected", desired="shutdown", version=31)))
    assert refs(changes) == [(K.SERVICE, o.SVC_DB), (K.NODE, o.NODE_DOWN)]


def test_running_counts_are_compared_over_the_whole_write(synced_cache: Cache) -> None:
    """One running task fails while a new one starts: the service's RunningTasks (and so the stack) are
    unchanged, the service and node details (task lists) did change."""
    changes = apply_tasks(synced_cache, task_listing(
        o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, state="failed", version=31),
        o.task("web2retry", o.SVC_WEB, o.NODE_WORKER, slot=2, version=32)))
    assert refs(changes) == [(K.SERVICE, o.SVC_WEB), (K.NODE, o.NODE_WORKER)]


def test_several_tasks_of_one_service_give_one_ref_per_object(synced_cache: Cache) -> None:
    changes = apply_tasks(synced_cache, task_listing(
        o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, slot=1, state="failed", version=31),
        o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, state="failed", version=31)))
    assert len(refs(changes)) == 4
    assert set(refs(changes)) == {(K.SERVICE, o.SVC_WEB), (K.NODE, o.NODE_MANAGER), (K.NODE, o.NODE_WORKER),
                                  (K.STACK, "shop")}


def test_a_task_created_or_removed_changes_its_service_and_node(synced_cache: Cache) -> None:
    created = apply_tasks(synced_cache, task_listing(o.task("extra", o.SVC_MONITOR, o.NODE_WORKER, slot=None)))
    assert refs(created) == [(K.SERVICE, o.SVC_MONITOR), (K.NODE, o.NODE_WORKER)]  # monitor has no stack
    removed = synced_cache.apply_inspect(K.TASK, o.TASK_DB_1, None, synced_cache.write_token())
    assert removed.value == "applied"
    last = list(synced_cache.history.since(created[-1].seq) or [])
    assert [(c.kind, c.action, c.id) for c in last] == [
        (K.TASK, Action.REMOVE, o.TASK_DB_1), (K.SERVICE, Action.REF_CHANGED, o.SVC_DB),
        (K.NODE, Action.REF_CHANGED, o.NODE_WORKER), (K.STACK, Action.REF_CHANGED, "shop")]


def test_a_service_and_its_task_changed_in_one_write_get_no_ref(synced_cache: Cache) -> None:
    snapshot = o.cluster()
    snapshot[K.SERVICE][1] = o.service(o.SVC_DB, "shop_db", stack="shop", image="postgres:17",
                                       secrets=((o.SEC_SHOP, "shop_db_password"),), networks=(o.NET_SHOP,),
                                       version=21)
    snapshot[K.TASK][2] = o.task(o.TASK_DB_1, o.SVC_DB, o.NODE_WORKER, slot=1, state="failed", version=31)
    changes = synced_cache.replace_all(snapshot, synced_cache.write_token())
    assert primary(changes) == {(K.SERVICE, Action.UPDATE, o.SVC_DB), (K.TASK, Action.UPDATE, o.TASK_DB_1)}
    assert sorted(refs(changes), key=str) == [(K.NODE, o.NODE_WORKER), (K.STACK, "shop")]


def test_a_service_rename_changes_its_tasks_their_nodes_and_every_referenced_object(
        synced_cache: Cache) -> None:
    renamed = o.service(o.SVC_DB, "shop_database", stack="shop", image="postgres:16",
                        secrets=((o.SEC_SHOP, "shop_db_password"),), networks=(o.NET_SHOP,), version=21)
    changes = synced_cache.upsert(K.SERVICE, renamed)
    assert primary(changes) == {(K.SERVICE, Action.UPDATE, o.SVC_DB)}
    assert set(refs(changes)) == {(K.SECRET, o.SEC_SHOP), (K.NETWORK, o.NET_SHOP), (K.TASK, o.TASK_DB_1),
                                  (K.TASK, o.TASK_DB_OLD), (K.NODE, o.NODE_WORKER), (K.NODE, o.NODE_DOWN),
                                  (K.STACK, "shop")}
    assert len(refs(changes)) == 7


def test_a_service_that_stops_using_a_config_changes_only_that_config(synced_cache: Cache) -> None:
    changed = o.service(o.SVC_MONITOR, "monitor", image="prom/node-exporter:v1.8.0", replicas=None,
                        networks=(o.NET_INGRESS,), version=21)
    changes = synced_cache.upsert(K.SERVICE, changed)
    assert refs(changes) == [(K.CONFIG, o.CFG_OTHER)]
    back = synced_cache.upsert(K.SERVICE, o.cluster()[K.SERVICE][2] | {"Version": {"Index": 22}})
    assert refs(back) == [(K.CONFIG, o.CFG_OTHER)]


def test_a_service_update_that_keeps_name_and_references_changes_only_its_stack(synced_cache: Cache) -> None:
    outside = synced_cache.upsert(K.SERVICE, o.cluster()[K.SERVICE][2] | {"Version": {"Index": 21}})
    assert refs(outside) == []
    web = o.cluster()[K.SERVICE][0]
    web["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "nginx:1.27"
    inside = synced_cache.upsert(K.SERVICE, web | {"Version": {"Index": 21}})
    assert refs(inside) == [(K.STACK, "shop")]


def test_a_new_service_changes_the_objects_it_uses_but_not_the_stack_it_joins(synced_cache: Cache) -> None:
    created = o.service("newsvc", "shop_cache", stack="shop", configs=((o.CFG_SHOP, "shop_nginx"),),
                        volumes=(o.VOL_OTHER,))
    changes = synced_cache.upsert(K.SERVICE, created)
    assert primary(changes) == {(K.SERVICE, Action.CREATE, "newsvc"), (K.STACK, Action.UPDATE, "shop")}
    assert refs(changes) == [(K.CONFIG, o.CFG_SHOP), (K.VOLUME, o.VOL_OTHER)]


def test_removing_a_service_changes_its_referenced_objects_and_orphaned_tasks(synced_cache: Cache) -> None:
    changes = synced_cache.remove(K.SERVICE, o.SVC_MONITOR)
    assert set(refs(changes)) == {(K.CONFIG, o.CFG_OTHER), (K.NETWORK, o.NET_INGRESS),
                                  (K.TASK, o.TASK_MON_MANAGER), (K.TASK, o.TASK_MON_WORKER),
                                  (K.TASK, o.TASK_MON_DOWN), (K.NODE, o.NODE_MANAGER), (K.NODE, o.NODE_WORKER),
                                  (K.NODE, o.NODE_DOWN)}


def test_a_stack_member_update_changes_the_stack(synced_cache: Cache) -> None:
    member = synced_cache.upsert(K.CONFIG, o.config(o.CFG_SHOP, "shop_nginx", stack="shop", version=41))
    assert refs(member) == [(K.STACK, "shop")]
    loner = synced_cache.upsert(K.CONFIG, o.config(o.CFG_OTHER, "app_settings", version=41))
    assert refs(loner) == []
    volume = synced_cache.upsert(K.VOLUME, o.volume(o.VOL_SHOP, stack="shop", driver="nfs"))
    assert refs(volume) == [(K.STACK, "shop")]


def test_membership_changes_are_stack_updates_not_refs(synced_cache: Cache) -> None:
    changes = synced_cache.upsert(K.SECRET, o.secret(o.SEC_OTHER, "tls_cert", stack="shop", version=51))
    assert primary(changes) == {(K.SECRET, Action.UPDATE, o.SEC_OTHER), (K.STACK, Action.UPDATE, "shop")}
    assert refs(changes) == []


def test_a_node_rename_changes_its_tasks_and_nothing_else_does(synced_cache: Cache) -> None:
    drained = synced_cache.upsert(K.NODE, o.node(o.NODE_DOWN, "worker-2", state="down", availability="active",
                                                 version=11))
    assert refs(drained) == []
    renamed = synced_cache.upsert(K.NODE, o.node(o.NODE_DOWN, "worker-2b", state="down", version=12))
    assert set(refs(renamed)) == {(K.TASK, o.TASK_DB_OLD), (K.TASK, o.TASK_MON_DOWN)}


def test_ref_changed_at_follows_the_latest_record_and_is_cleared_on_removal(synced_cache: Cache) -> None:
    assert synced_cache.ref_changed_at(K.SERVICE, o.SVC_WEB) is None
    changes = apply_tasks(synced_cache, task_listing(
        o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2, state="failed", version=31)))
    service_ref = next(c for c in changes if c.kind is K.SERVICE)
    assert synced_cache.ref_changed_at(K.SERVICE, o.SVC_WEB) == service_ref.timestamp
    synced_cache.remove(K.SERVICE, o.SVC_WEB)
    assert synced_cache.ref_changed_at(K.SERVICE, o.SVC_WEB) is None


def _rendered(cache: Cache) -> dict[Key, object]:
    """Every object's detail representation, as the REST layer builds it."""
    return {(kind, entry.id): representations.detail(cache, entry, "")
            for kind in ResourceKind for entry in cache.entries(kind)}


def test_ref_changed_records_exactly_the_details_that_changed_through_another_object(
        synced_cache: Cache) -> None:
    """Cross-check the rules against the representations themselves, over a mixed sequence of writes."""
    writes = [
        lambda c: c.upsert(K.SERVICE, o.service(o.SVC_DB, "shop_database", stack="shop", version=21)),
        lambda c: apply_tasks(c, task_listing(
            o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, state="failed", version=31),
            o.task("extra", o.SVC_MONITOR, o.NODE_DOWN, slot=None, version=32))),
        lambda c: c.upsert(K.NODE, o.node(o.NODE_WORKER, "worker-one", version=11)),
        lambda c: c.upsert(K.CONFIG, o.config(o.CFG_SHOP, "shop_nginx", stack="shop", version=41)),
        lambda c: c.remove(K.SERVICE, o.SVC_MONITOR),
        lambda c: c.upsert(K.SERVICE, o.service("late", "late", configs=((o.CFG_OTHER, "app_settings"),))),
    ]
    for write in writes:
        before = _rendered(synced_cache)
        start = synced_cache.history.last_seq
        write(synced_cache)
        after = _rendered(synced_cache)
        records = synced_cache.history.since(start) or []
        own = {(c.kind, c.id) for c in records if c.action is not Action.REF_CHANGED}
        changed_by_others = {key for key in before.keys() & after.keys()
                             if before[key] != after[key] and key not in own}
        assert set(refs(records)) == changed_by_others
        assert len(refs(records)) == len(set(refs(records)))


# --------------------------------------------------------------------------- seeded random walk
_NODES = [o.NODE_MANAGER, o.NODE_WORKER, o.NODE_DOWN, "nodeextra"]
_SERVICES = [o.SVC_WEB, o.SVC_DB, o.SVC_MONITOR, "svcextra"]
_STATES = ["running", "running", "failed", "pending", "shutdown"]


class _Walk:
    """Random writes over the synthetic cluster, each with fresh versions, as the watcher would apply them."""

    def __init__(self, seed: int) -> None:
        import random

        self.rng = random.Random(seed)
        self.version = 1000

    def next_version(self) -> int:
        self.version += 1
        return self.version

    def service(self, service_id: str) -> dict:  # type: ignore[type-arg]
        rng = self.rng
        return o.service(
            service_id, rng.choice(["alpha", "beta"]) + "-" + service_id[:6],   # swarm names are unique
            stack=rng.choice([None, "shop", "other"]), image=rng.choice(["nginx:1", "nginx:2"]),
            replicas=rng.choice([1, 2, None]),
            configs=tuple(rng.sample([(o.CFG_SHOP, "shop_nginx"), (o.CFG_OTHER, "app_settings")], rng.randint(0, 2))),
            secrets=tuple(rng.sample([(o.SEC_SHOP, "pw"), (o.SEC_OTHER, "tls")], rng.randint(0, 2))),
            networks=tuple(rng.sample([o.NET_SHOP, o.NET_INGRESS, o.NET_BRIDGE], rng.randint(0, 2))),
            volumes=tuple(rng.sample([o.VOL_SHOP, o.VOL_OTHER], rng.randint(0, 1))), version=self.next_version())

    def task(self, task_id: str, service_id: str | None = None) -> dict:  # type: ignore[type-arg]
        """A new task, or a new version of one (a task never changes service)."""
        rng = self.rng
        return o.task(task_id, service_id or rng.choice(_SERVICES), rng.choice(_NODES), slot=rng.choice([1, 2, None]),
                      state=rng.choice(_STATES), desired=rng.choice(["running", "shutdown"]),
                      version=self.next_version(), updated=rng.choice([o.UPDATED, "2024-06-01T00:00:00Z"]))

    def write(self, cache: Cache) -> None:
        rng = self.rng
        choice = rng.randrange(9)
        task_ids = [entry.id for entry in cache.entries(K.TASK)]
        if choice == 0 and task_ids:                              # a task changes (maybe just its timestamp)
            task_id = rng.choice(task_ids)
            entry = cache.get(K.TASK, task_id)
            assert entry is not None
            raw = {**entry.raw, "Version": {"Index": self.next_version()}, "UpdatedAt": "2024-07-01T00:00:00Z"}
            if rng.random() < 0.6:
                raw["Status"] = {**raw["Status"], "State": rng.choice(_STATES)}
            cache.apply_inspect(K.TASK, task_id, raw, cache.write_token())
        elif choice == 1:                                         # a poll: some tasks change, come and go
            listing = [entry.raw for entry in cache.entries(K.TASK) if rng.random() < 0.8]
            listing += [self.task(f"task{self.next_version()}") for _ in range(rng.randint(0, 3))]
            cache.apply_listing(K.TASK, listing, cache.write_token())
        elif choice == 2:
            cache.apply_inspect(K.SERVICE, (sid := rng.choice(_SERVICES)), self.service(sid), cache.write_token())
        elif choice == 3:
            cache.apply_inspect(K.SERVICE, rng.choice(_SERVICES), None, cache.write_token())
        elif choice == 4:
            node_id = rng.choice(_NODES)
            raw = o.node(node_id, rng.choice(["n-a", "n-b"]), availability=rng.choice(["active", "drain"]),
                         version=self.next_version())
            cache.apply_inspect(K.NODE, node_id, None if rng.random() < 0.2 else raw, cache.write_token())
        elif choice == 5:
            config_id = rng.choice([o.CFG_SHOP, o.CFG_OTHER])
            raw = o.config(config_id, "cfg", stack=rng.choice([None, "shop"]), version=self.next_version())
            cache.apply_inspect(K.CONFIG, config_id, None if rng.random() < 0.2 else raw, cache.write_token())
        elif choice == 6:
            name = rng.choice([o.VOL_SHOP, o.VOL_OTHER])
            raw = o.volume(name, stack=rng.choice([None, "shop"]), driver=rng.choice(["local", "nfs"]))
            cache.apply_inspect(K.VOLUME, name, None if rng.random() < 0.2 else raw, cache.write_token())
        elif choice == 7:
            network_id = rng.choice([o.NET_SHOP, o.NET_INGRESS])
            raw = o.network(network_id, rng.choice(["net-a", "net-b"]), stack=rng.choice([None, "shop"]))
            cache.apply_inspect(K.NETWORK, network_id, raw, cache.write_token())
        else:                                                     # a full sync with a few differences
            snapshot = {kind: [entry.raw for entry in cache.entries(kind)] for kind in ResourceKind
                        if kind is not K.STACK}
            snapshot[K.SERVICE] = [self.service(sid) if rng.random() < 0.3 else raw
                                   for sid, raw in ((raw["ID"], raw) for raw in snapshot[K.SERVICE])]
            snapshot[K.TASK] = [self.task(raw["ID"], raw["ServiceID"]) if rng.random() < 0.2 else raw
                                for raw in snapshot[K.TASK]]
            cache.replace_all(snapshot, cache.write_token())


@pytest.mark.parametrize("seed", range(6))
def test_ref_changed_matches_the_representations_over_a_random_walk(seed: int) -> None:
    cache = Cache()
    cache.replace_all(o.cluster(), cache.write_token())
    walk = _Walk(seed)
    for step in range(120):
        before = _rendered(cache)
        start = cache.history.last_seq
        walk.write(cache)
        after = _rendered(cache)
        records = cache.history.since(start) or []
        own = {(c.kind, c.id) for c in records if c.action is not Action.REF_CHANGED}
        changed_by_others = {key for key in before.keys() & after.keys() if before[key] != after[key]
                             and key not in own}
        assert set(refs(records)) == changed_by_others, (seed, step)
        assert len(refs(records)) == len(set(refs(records))), (seed, step)
        # every ref_changed comes after every change of its write
        kinds = [c.action is Action.REF_CHANGED for c in records]
        assert kinds == sorted(kinds), (seed, step)
