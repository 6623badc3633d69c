"""A listing applied in parts (Cache.start_listing / PendingListing.step): the same end state and changes as
one whole write, each part one complete write, and writes landing between two parts respected."""

from __future__ import annotations

from app.cache.history import Action, Change
from app.cache.listings import prepare_listing
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import Raw

K = ResourceKind


def scaled(count: int, state: str, version: int) -> list[Raw]:
    return [o.task(o.engine_id(f"bulk{i:04d}"), o.SVC_WEB, o.NODE_WORKER, slot=i + 10, state=state,
                   version=version) for i in range(count)]


def fresh(objects: dict[ResourceKind, list[Raw]], tasks: list[Raw]) -> Cache:
    cache = Cache()
    cache.replace_all({**objects, K.TASK: [t for t in objects[K.TASK] if t["ServiceID"] != o.SVC_WEB] + tasks},
                      cache.write_token(), 0.01)
    return cache


def web_tasks(cache: Cache) -> dict[str, tuple[str, int]]:
    return {e.id: (str(e.activation["state"]), e.version or 0) for e in cache.tasks_of_service(o.SVC_WEB)}


def test_parts_end_where_one_whole_write_ends(objects: dict[ResourceKind, list[Raw]]) -> None:
    before, after = scaled(30, "pending", 40), scaled(25, "running", 41)   # 25 updated, 5 removed
    whole, parted = fresh(objects, before), fresh(objects, before)
    batches: list[list[Change]] = []
    parted.subscribe(batches.append)

    whole.apply_listing(K.TASK, after, whole.write_token(), service_id=o.SVC_WEB)
    pending = parted.start_listing(K.TASK, prepare_listing(K.TASK, after, o.SVC_WEB), parted.write_token(),
                                   service_id=o.SVC_WEB)
    assert pending is not None and pending.remaining == 30
    steps = 0
    while not pending.done:
        pending.step(4)
        steps += 1
    assert steps == 8 and len(batches) == 8                  # each part one write, one batch
    assert web_tasks(parted) == web_tasks(whole)
    assert [c.action for c in batches[0][:4]] == [Action.REMOVE] * 4   # removals first
    own = [c for batch in batches for c in batch if c.action is not Action.REF_CHANGED]
    assert len(own) == 30


def test_a_newer_write_between_two_parts_is_kept(objects: dict[ResourceKind, list[Raw]]) -> None:
    cache = fresh(objects, scaled(10, "pending", 40))
    token = cache.write_token()
    pending = cache.start_listing(K.TASK, scaled(10, "running", 41), token, service_id=o.SVC_WEB)
    assert pending is not None
    pending.step(3)
    last = scaled(10, "failed", 42)[9]                       # an inspect, newer than the listing, lands
    cache.apply_inspect(K.TASK, last["ID"], last, cache.write_token())
    removed = scaled(10, "running", 41)[8]["ID"]             # and a removal of another listed task
    cache.apply_inspect(K.TASK, removed, None, cache.write_token())
    while not pending.done:
        pending.step(3)
    states = web_tasks(cache)
    assert states[last["ID"]] == ("failed", 42)              # not moved back by the older listing
    assert removed not in states                             # not re-created by it
    assert sum(1 for state, _ in states.values() if state == "running") == 8


def test_an_older_listing_is_refused_whole(objects: dict[ResourceKind, list[Raw]]) -> None:
    cache = fresh(objects, scaled(5, "pending", 40))
    old_token = cache.write_token()
    cache.apply_listing(K.TASK, scaled(5, "running", 41), cache.write_token(), service_id=o.SVC_WEB)
    assert cache.start_listing(K.TASK, scaled(5, "pending", 40), old_token, service_id=o.SVC_WEB) is None


def test_an_unchanged_listing_has_nothing_to_apply(objects: dict[ResourceKind, list[Raw]]) -> None:
    tasks = scaled(5, "pending", 40)
    cache = fresh(objects, tasks)
    pending = cache.start_listing(K.TASK, tasks, cache.write_token(), service_id=o.SVC_WEB)
    assert pending is not None and pending.done and pending.step() == []
