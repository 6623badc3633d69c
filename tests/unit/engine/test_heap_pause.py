"""app/heap.py's collector pause and the task poller's freezing of a mass change (docs/performance-watcher.md):
no automatic collection while a listing lives, and a listing with thousands of differences is frozen as it
is applied, so nothing walks the whole write at once."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app import heap
from app.cache.listings import Listing, prepare_listing
from app.cache.store import Cache
from app.engine.task_poll import TaskPoller, TaskPollSettings
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import Raw


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


def test_the_pause_nests_and_the_outermost_block_restores_the_collector() -> None:
    with heap.collector_paused():
        with heap.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the inner block must not end the outer pause"
    assert gc.isenabled()


def test_the_pause_ends_on_an_exception_and_keeps_a_collector_that_was_off_off() -> None:
    with pytest.raises(RuntimeError), heap.collector_paused():
        raise RuntimeError("a failed fetch")
    assert gc.isenabled()
    gc.disable()
    with heap.collector_paused():
        pass
    assert not gc.isenabled(), "a collector someone else turned off stays off"


class Lister:
    def __init__(self, tasks: list[Raw]) -> None:
        self.tasks = tasks

    def list_tasks(self, service_id: str | None = None) -> Listing:
        return prepare_listing(ResourceKind.TASK, [dict(t) for t in self.tasks], service_id)


def tracked_young(obj: object) -> bool:
    return any(x is obj for g in (0, 1, 2) for x in gc.get_objects(generation=g))


@pytest.mark.parametrize(("count", "frozen"), [(1200, True), (50, False)])
def test_a_mass_change_is_frozen_part_by_part_as_it_is_applied(synced_cache: Cache, count: int,
                                                               frozen: bool) -> None:
    """Between two parts of a 1,200-task apply, what the earlier parts wrote is already frozen (a
    collection at the end walked the whole write: 100-400 ms at 10,000 tasks); a small listing is not."""
    tasks = [o.task(o.engine_id(f"mass{i:04d}"), o.SVC_WEB, o.NODE_WORKER, slot=i + 10, state="pending")
             for i in range(count)]
    young_between_parts: list[bool] = []

    def between_parts() -> None:
        written = [synced_cache.get(ResourceKind.TASK, t["ID"]) for t in tasks]
        first = next(entry for entry in written if entry is not None)
        young_between_parts.append(tracked_young(first))   # the entry the apply built (the raw is the listing's)

    poller = TaskPoller(lambda: Lister(tasks), synced_cache, lambda: True,  # type: ignore[arg-type,return-value]
                        lambda exc: None, TaskPollSettings(debounce=0.0, follow_ups=(), counts_interval=0,
                                                           freeze_heap=True, large_listing=1000, apply_step=100),
                        pause=between_parts)
    gc.collect()
    poller.hint(o.SVC_WEB)
    poller.poll_once()
    entry = synced_cache.get(ResourceKind.TASK, tasks[-1]["ID"])
    assert entry is not None and gc.is_tracked(entry)
    assert gc.isenabled()
    if frozen:
        assert len(young_between_parts) >= 11 and not any(young_between_parts)
        assert not tracked_young(entry)
    else:
        assert young_between_parts == []   # one part
        assert tracked_young(entry), "a small listing is not frozen (no freeze, no settle)"
