"""Readable subsets kept across requests (``app.acl.memo``): reused while nothing changes, recomputed when
the listed kind, a service or the grants change, never stale after a write."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from app.acl.evaluator import Access, access_for
from app.acl.memo import ReadableMemo, memo_for, readable_subset
from app.acl.policy import parse_policy
from app.auth.identity import Identity
from app.cache.entries import Entry
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o

ALICE = Identity("alice", "Alice", "headers")


class Keep:
    """A read predicate like ``app.http.acl_read.ReadFilter``: the access's decision, counted, with a key."""

    def __init__(self, access: Access, cache: Cache) -> None:
        self.access, self.cache, self.calls = access, cache, 0

    @property
    def memo_key(self) -> object:
        return ("read", self.access.grants)

    def __call__(self, entry: Entry) -> bool:
        self.calls += 1
        return self.access.can_read(entry, self.cache)


def keep_for(cache: Cache, *resources: str) -> Keep:
    policy = parse_policy({"grants": [{"resources": list(resources), "permissions": ["read"]}]})
    return Keep(access_for(ALICE, policy, auth_enabled=True), cache)


@pytest.fixture
def cache() -> Cache:
    store = Cache()
    store.replace_all(o.cluster())
    return store


def ids(entries: list[Entry]) -> set[str]:
    return {e.id for e in entries}


def test_the_same_grants_reuse_the_subset(cache: Cache) -> None:
    memo = ReadableMemo(cache)
    first, second = keep_for(cache, "stack:shop"), keep_for(cache, "stack:shop")   # two requests
    tasks = cache.entries(ResourceKind.TASK)
    subset = memo.select(first.memo_key, tasks, first)
    assert ids(subset) == {o.TASK_WEB_1, o.TASK_WEB_2, o.TASK_DB_1, o.TASK_DB_OLD}
    assert memo.select(second.memo_key, cache.entries(ResourceKind.TASK), second) is subset
    assert second.calls == 0 and (memo.hits, memo.misses) == (1, 1)


def test_other_grants_other_subset(cache: Cache) -> None:
    memo = ReadableMemo(cache)
    shop, monitor = keep_for(cache, "stack:shop"), keep_for(cache, "service:monitor")
    tasks = cache.entries(ResourceKind.TASK)
    assert ids(memo.select(shop.memo_key, tasks, shop)) == {o.TASK_WEB_1, o.TASK_WEB_2, o.TASK_DB_1, o.TASK_DB_OLD}
    assert ids(memo.select(monitor.memo_key, tasks, monitor)) == {o.TASK_MON_MANAGER, o.TASK_MON_WORKER,
                                                                  o.TASK_MON_DOWN}
    assert monitor.calls == len(tasks)


def test_each_list_has_its_own_subset(cache: Cache) -> None:
    memo = ReadableMemo(cache)
    keep = keep_for(cache, "stack:shop")
    plain = memo.select(keep.memo_key, cache.entries(ResourceKind.TASK), keep)
    by_state = memo.select(keep.memo_key, cache.sorted_entries(ResourceKind.TASK, "state"), keep)
    assert ids(plain) == ids(by_state) and plain is not by_state
    services = memo.select(keep.memo_key, cache.entries(ResourceKind.SERVICE), keep)
    assert {e.name for e in services} == {"shop_web_api", "shop_db"}


@pytest.mark.parametrize("write", [
    pytest.param(lambda c: c.upsert(ResourceKind.TASK, o.task(o.engine_id("tasknew"), o.SVC_DB, o.NODE_WORKER,
                                                               slot=2)), id="a new task"),
    pytest.param(lambda c: c.remove(ResourceKind.TASK, o.TASK_DB_1), id="a task removed"),
    pytest.param(lambda c: c.upsert(ResourceKind.SERVICE, o.service(o.SVC_DB, "shop_db", stack=None, version=99)),
                 id="a service leaves the stack"),
    pytest.param(lambda c: c.upsert(ResourceKind.SERVICE, o.service(o.SVC_MONITOR, "monitor", stack="shop", version=99,
                                                                     replicas=None)),
                 id="a service joins the stack"),
])
def test_a_write_is_never_answered_from_the_memo(cache: Cache, write: Callable[[Cache], object]) -> None:
    memo = ReadableMemo(cache)
    keep = keep_for(cache, "stack:shop")
    memo.select(keep.memo_key, cache.entries(ResourceKind.TASK), keep)
    write(cache)
    fresh = keep_for(cache, "stack:shop")
    tasks = cache.entries(ResourceKind.TASK)
    assert ids(memo.select(fresh.memo_key, tasks, fresh)) == {t.id for t in tasks if fresh.access.can_read(t, cache)}
    assert fresh.calls == len(tasks)


def test_a_service_change_alone_invalidates_its_tasks_subset(cache: Cache) -> None:
    """The task list itself is unchanged; the answer must still follow the service's new stack label."""
    memo = ReadableMemo(cache)
    keep = keep_for(cache, "stack:shop")
    tasks = cache.entries(ResourceKind.TASK)
    before = ids(memo.select(keep.memo_key, tasks, keep))
    moved = copy.deepcopy(cache.get(ResourceKind.SERVICE, o.SVC_DB).raw)    # type: ignore[union-attr]
    moved["Spec"]["Labels"] = {}
    moved["Version"]["Index"] += 1
    cache.upsert(ResourceKind.SERVICE, moved)
    assert cache.entries(ResourceKind.TASK) is tasks                      # tasks untouched
    fresh = keep_for(cache, "stack:shop")
    after = ids(memo.select(fresh.memo_key, tasks, fresh))
    assert before - after == {o.TASK_DB_1, o.TASK_DB_OLD}


def test_changes_free_the_memo_and_the_size_is_bounded(cache: Cache) -> None:
    memo = ReadableMemo(cache, size=2)
    for resource in ("stack:shop", "service:monitor", "node:*"):
        keep = keep_for(cache, resource)
        memo.select(keep.memo_key, cache.entries(ResourceKind.TASK), keep)
    assert len(memo._kept) == 2
    cache.remove(ResourceKind.VOLUME, o.VOL_OTHER)                       # any change batch clears it
    assert len(memo._kept) == 0


def test_readable_subset_without_a_key_is_computed(cache: Cache) -> None:
    tasks = cache.entries(ResourceKind.TASK)
    chosen = readable_subset(cache, tasks, lambda e: e.id == o.TASK_WEB_1)
    assert ids(chosen) == {o.TASK_WEB_1}
    keep = keep_for(cache, "service:monitor")
    assert readable_subset(cache, tasks, keep) is readable_subset(cache, tasks, keep)
    assert memo_for(cache) is memo_for(cache)
