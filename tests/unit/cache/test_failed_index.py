"""The cache's index of failed tasks per service (the restart-loop check reads it instead of walking every
task of a 10,000-task service)."""

from __future__ import annotations

from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import Raw

K = ResourceKind


def failed_ids(cache: Cache, service_id: str) -> set[str]:
    return {entry.id for entry in cache.failed_tasks(service_id)}


def test_failed_and_rejected_tasks_are_indexed_and_leave_on_recovery_and_removal(
        objects: dict[ResourceKind, list[Raw]]) -> None:
    cache = Cache()
    cache.replace_all(objects, cache.write_token(), 0.01)
    first, second = o.engine_id("failedone"), o.engine_id("rejectedtwo")
    cache.apply_inspect(K.TASK, first, o.task(first, o.SVC_DB, o.NODE_WORKER, state="failed", version=50),
                        cache.write_token())
    cache.apply_inspect(K.TASK, second, o.task(second, o.SVC_DB, o.NODE_WORKER, state="rejected", version=50),
                        cache.write_token())
    assert {first, second} <= failed_ids(cache, o.SVC_DB)
    assert not {first, second} & failed_ids(cache, o.SVC_WEB)
    cache.apply_inspect(K.TASK, first, o.task(first, o.SVC_DB, o.NODE_WORKER, state="running", version=51),
                        cache.write_token())
    cache.apply_inspect(K.TASK, second, None, cache.write_token())
    assert not {first, second} & failed_ids(cache, o.SVC_DB)
    expected = {t["ID"] for t in objects[K.TASK]
                if t["ServiceID"] == o.SVC_DB and t["Status"]["State"] in ("failed", "rejected")}
    assert failed_ids(cache, o.SVC_DB) == expected
