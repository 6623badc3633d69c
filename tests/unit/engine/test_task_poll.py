"""TaskPoller with fakes (docs/responsiveness.md): which services are listed for which signals, follow-ups, the engine's
task counts, the full sweep, the write tokens passed to the cache, failures, and listings never decoded
on the hub."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import gevent
import pytest

from app.cache.listings import Listing, prepare_listing
from app.cache.store import Cache
from app.engine.client import EngineUnavailable, ServiceGone
from app.engine.task_poll import TaskPoller, TaskPollSettings
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import Raw
from tests.unit.support import wait_until

K = ResourceKind
SETTINGS = TaskPollSettings(debounce=0.0, follow_ups=(0.5, 1.5), counts_interval=2.0, sweep_interval=60.0,
                            max_services=3)


class Lister:
    """An engine client with scoped task listings and counts; records every call and the token taken."""

    def __init__(self, tasks: list[Raw], cache: Cache) -> None:
        self.tasks = tasks
        self.cache = cache
        self.calls: list[tuple[str, str | None]] = []
        self.tokens_after: list[int] = []   # a write token taken right after each listing call
        self.counts: dict[str, tuple[int, int, int]] = {}
        self.fail: Exception | None = None
        self.gone: set[str] = set()   # services the engine no longer has (404 on a scoped listing)

    def list_tasks(self, service_id: str | None = None) -> Listing:
        if self.fail is not None:
            raise self.fail
        if service_id in self.gone:
            self.calls.append(("gone", service_id))
            raise ServiceGone(service_id)
        self.calls.append(("list", service_id))
        self.tokens_after.append(self.cache.write_token())
        return prepare_listing(K.TASK, [dict(t) for t in self.tasks], service_id)

    def service_counts(self) -> dict[str, tuple[int, int, int]]:
        if self.fail is not None:
            raise self.fail
        self.calls.append(("counts", None))
        return dict(self.counts)

    def list(self, kind: ResourceKind) -> list[Raw]:
        raise AssertionError("the poller must use scoped listings when the client has them")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cache(synced_cache: Cache) -> Cache:
    return synced_cache


@pytest.fixture
def lister(cache: Cache, objects: dict[ResourceKind, list[Raw]]) -> Lister:
    return Lister(objects[K.TASK], cache)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def poller(lister: Lister, cache: Cache, clock: Clock) -> TaskPoller:
    return TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                      SETTINGS, clock=clock)


def container_event(service_id: str, action: str = "die") -> dict[str, Any]:
    return {"Type": "container", "Action": action,
            "Actor": {"ID": "c" * 64, "Attributes": {"com.docker.swarm.service.id": service_id,
                                                     "com.docker.swarm.task.id": o.TASK_WEB_1}}}


def listed(lister: Lister) -> list[str | None]:
    return [scope for op, scope in lister.calls if op == "list"]


# --------------------------------------------------------------------------- which services are listed
def test_a_container_event_lists_only_its_service(poller: TaskPoller, lister: Lister) -> None:
    poller.hint_event(container_event(o.SVC_WEB))
    poller.poll_once()
    assert listed(lister) == [o.SVC_WEB]


def test_noise_events_list_nothing(poller: TaskPoller, lister: Lister) -> None:
    for action in ("exec_start: sh -c true", "exec_die", "health_status: healthy", "top"):
        poller.hint_event(container_event(o.SVC_WEB, action))
    poller.hint_event({"Type": "container", "Action": "die", "Actor": {"ID": "x", "Attributes": {}}})
    poller.hint_event({"Type": "config", "Action": "update", "Actor": {"ID": o.CFG_OTHER}})
    poller.poll_once()
    assert listed(lister) == []


def test_a_service_event_lists_that_service_and_a_node_event_lists_everything(
        poller: TaskPoller, lister: Lister) -> None:
    poller.hint_event({"Type": "service", "Action": "update", "Actor": {"ID": o.SVC_DB}})
    poller.poll_once()
    poller.hint_event({"Type": "node", "Action": "update", "Actor": {"ID": o.NODE_WORKER}})
    poller.poll_once()
    assert listed(lister) == [o.SVC_DB, None]


def test_many_services_at_once_become_one_full_listing(poller: TaskPoller, lister: Lister) -> None:
    for service_id in ("a", "b", "c", "d"):
        poller.hint(service_id)
    poller.poll_once()
    assert listed(lister) == [None]


def test_a_hinted_service_is_listed_again_at_each_follow_up(poller: TaskPoller, lister: Lister,
                                                            clock: Clock) -> None:
    poller.hint(o.SVC_WEB)
    poller.poll_once()
    for delay, expected in ((0.3, 1), (0.5, 2), (1.0, 2), (1.5, 3), (1.9, 3)):
        clock.now = 1000.0 + delay
        poller.poll_once()
        assert len(listed(lister)) == expected, delay
    assert set(listed(lister)) == {o.SVC_WEB}


# --------------------------------------------------------------------------- the counts signal and the sweep
def counts_poll_gaps(cache: Cache, lister: Lister, clock: Clock, cost: float) -> list[float]:
    """The gaps between four counts polls (reference, quiet, changed, next) when each costs ``cost`` s."""
    original = lister.service_counts

    def costly() -> dict[str, tuple[int, int, int]]:
        clock.now += cost                   # the engine takes this long to answer
        return original()

    lister.service_counts = costly  # type: ignore[method-assign]
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(), counts_interval=1.0, sweep_interval=3600),
                        clock=clock)

    polled_at: list[float] = []

    def next_counts_poll() -> float:
        """Step the clock by 50 ms until a counts poll happens; return when it started."""
        before = [op for op, _ in lister.calls].count("counts")
        for _ in range(1000):
            clock.now += 0.05
            started = clock.now
            poller.poll_once()
            if [op for op, _ in lister.calls].count("counts") > before:
                polled_at.append(started)
                return started
        raise AssertionError("no counts poll within 50 s")

    lister.counts = {o.SVC_WEB: (1, 1, 0)}
    next_counts_poll()                                  # the reference counts
    next_counts_poll()                                  # unchanged: quiet
    lister.counts = {o.SVC_WEB: (0, 1, 0)}
    next_counts_poll()                                  # changed
    next_counts_poll()
    return [round(b - a, 2) for a, b in pairwise(polled_at)]


def test_the_counts_wait_30x_their_cost_and_60x_when_nothing_changed(cache: Cache, lister: Lister,
                                                                     clock: Clock) -> None:
    """On a large engine the counts cost ~56 ms of its CPU: at most 1/30 of the time goes to them, 1/60 on
    an idle cluster (the idle-CPU target for the engine)."""
    gaps = counts_poll_gaps(cache, lister, clock, cost=0.05)
    assert 3.05 <= gaps[0] <= 3.3          # after the reference (nothing known to change): 0.05 s + 60 x 0.05 s
    assert 3.05 <= gaps[1] <= 3.3          # after a quiet round: the same
    assert 1.55 <= gaps[2] <= 1.8          # after a round that saw a change: 0.05 s + 30 x 0.05 s


def test_the_counts_stretch_is_capped_however_busy_the_engine(cache: Cache, lister: Lister,
                                                              clock: Clock) -> None:
    """A busy engine answering the counts in 0.5 s stretched them to 15-30 s, and a change only they see
    (a task on another node) waited that long: the stretch stops at ``counts_max_interval`` (4 s)."""
    gaps = counts_poll_gaps(cache, lister, clock, cost=0.5)
    assert all(4.5 <= gap <= 4.75 for gap in gaps), gaps   # 0.5 s of call + 4 s, not 0.5 + 30 x 0.5


def test_services_whose_task_counts_moved_are_listed(poller: TaskPoller, lister: Lister, clock: Clock) -> None:
    lister.counts = {o.SVC_WEB: (2, 2, 0), o.SVC_DB: (1, 1, 0)}
    clock.now += SETTINGS.counts_interval
    poller.poll_once()                      # the first counts are the reference: nothing listed
    assert listed(lister) == []
    lister.counts = {o.SVC_WEB: (1, 2, 0), o.SVC_DB: (1, 1, 0), "new": (0, 1, 0)}
    clock.now += 1.0
    poller.poll_once()                      # not due yet
    assert [op for op, _ in lister.calls].count("counts") == 1
    clock.now += SETTINGS.counts_interval
    poller.poll_once()
    assert sorted(s for s in listed(lister) if s) == sorted([o.SVC_WEB, "new"])
    clock.now += SETTINGS.counts_interval
    poller.poll_once()                      # unchanged counts: nothing more
    assert len(listed(lister)) == 2


def test_the_full_sweep_runs_at_its_interval(poller: TaskPoller, lister: Lister, clock: Clock) -> None:
    clock.now += SETTINGS.sweep_interval - 0.1
    poller.poll_once()
    assert None not in listed(lister)
    clock.now += 0.1
    poller.poll_once()
    assert listed(lister) == [None]
    clock.now += SETTINGS.sweep_interval / 2
    poller.poll_once()
    assert listed(lister) == [None]


def test_a_client_without_counts_gets_a_full_listing_at_the_counts_interval(
        cache: Cache, clock: Clock, objects: dict[ResourceKind, list[Raw]]) -> None:
    class Plain:
        calls = 0

        def list(self, kind: ResourceKind) -> list[Raw]:
            Plain.calls += 1
            return [dict(t) for t in objects[K.TASK]]

    poller = TaskPoller(lambda: Plain(), cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        SETTINGS, clock=clock)
    clock.now += SETTINGS.counts_interval
    poller.poll_once()
    assert Plain.calls == 1 and poller.stats.full_listings == 1


# --------------------------------------------------------------------------- mass changes
def scaled(count: int, state: str = "pending", version: int = 5) -> list[Raw]:
    return [o.task(o.engine_id(f"mass{i:04d}"), o.SVC_WEB, o.NODE_WORKER, slot=i + 10, state=state,
                   version=version) for i in range(count)]


def test_a_listing_with_many_changes_keeps_its_service_followed_until_it_settles(
        cache: Cache, lister: Lister, clock: Clock) -> None:
    """A service scaled by thousands: the engine writes the tasks over seconds and pending tasks emit no
    events, so after the hint's follow-ups the rest waited for the counts or the sweep (2.5-49 s at 10,000).
    A listing that changed ``keep_following`` tasks lists the service again after each moving follow-up."""
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(0.5,), counts_interval=0, sweep_interval=3600,
                                         keep_following=10, moving_follow_ups=(1.0, 3.0)), clock=clock)
    base = list(lister.tasks)
    lister.tasks = base + scaled(40)             # the engine's first batch
    poller.hint(o.SVC_WEB)
    poller.poll_once()                           # 40 changes: moving, follow-ups at +1 s and +3 s
    lister.tasks = base + scaled(80)             # the engine writes the next batch meanwhile
    clock.now += 1.0
    poller.poll_once()                           # 40 more: follow-ups re-armed from here
    assert len(cache.task_ids_of_service(o.SVC_WEB)) >= 80
    clock.now += 1.0
    poller.poll_once()                           # +1 s after the second listing: nothing changed any more
    clock.now += 2.0
    poller.poll_once()                           # +3 s after the second listing: the last follow-up
    assert listed(lister) == [o.SVC_WEB] * 4
    assert poller.stats.moving_follow_ups == 2
    clock.now += 60.0
    poller.poll_once()
    assert len(listed(lister)) == 4, "a listing without many changes does not re-arm the follow-ups"


def test_a_hint_does_not_cut_a_mass_changes_longer_follow_ups(cache: Cache, lister: Lister, clock: Clock) -> None:
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(0.5,), counts_interval=0, sweep_interval=3600,
                                         keep_following=10, moving_follow_ups=(4.0,)), clock=clock)
    lister.tasks = list(lister.tasks) + scaled(20)
    poller.hint(o.SVC_WEB)
    poller.poll_once()                           # moving: listed again at +4 s
    poller.hint_event(container_event(o.SVC_WEB))   # a container event: its own follow-up at +0.5 s
    poller.poll_once()
    for step in (0.5, 3.5):
        clock.now += step
        poller.poll_once()
    assert listed(lister) == [o.SVC_WEB] * 4      # hint, event, +0.5 s, and still the +4 s one


def test_a_full_listing_with_many_changes_is_followed_by_full_listings(cache: Cache, lister: Lister,
                                                                       clock: Clock) -> None:
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(), counts_interval=0, sweep_interval=3600,
                                         keep_following=10, moving_follow_ups=(1.0,)), clock=clock)
    lister.tasks = list(lister.tasks) + scaled(30)
    poller.hint(None)
    poller.poll_once()
    clock.now += 1.0
    poller.poll_once()
    clock.now += 1.0
    poller.poll_once()
    assert listed(lister) == [None, None]


def test_the_collector_is_paused_while_a_listing_lives(cache: Cache, lister: Lister, clock: Clock) -> None:
    """Each automatic young collection walked the ~7 fresh objects per task of a live listing on the hub
    (20-85 ms at 10,000 tasks): none runs from the fetch to the end of the apply."""
    import gc

    seen: list[bool] = []
    original_list, original_start = lister.list_tasks, cache.start_listing

    def fetching(service_id: str | None = None) -> Listing:
        seen.append(gc.isenabled())
        return original_list(service_id)

    def applying(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original_start(*args, **kwargs)

    lister.list_tasks = fetching  # type: ignore[method-assign]
    cache.start_listing = applying  # type: ignore[method-assign]
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        SETTINGS, clock=clock)
    assert gc.isenabled()
    poller.hint(o.SVC_WEB)
    poller.poll_once()
    lister.fail = EngineUnavailable("refused")
    poller.hint(o.SVC_WEB)
    with pytest.raises(Exception):   # noqa: B017  # the fetch failure, whatever the wrapper
        poller.poll_once()
    assert seen == [False, False, False]   # fetch and apply, then the failed fetch
    assert gc.isenabled(), "the collector is back on after a listing, failed or not"


# --------------------------------------------------------------------------- tokens and the cache
def test_each_listing_is_applied_with_a_token_taken_before_the_call(poller: TaskPoller, lister: Lister,
                                                                    cache: Cache) -> None:
    applied: list[tuple[int, str | None]] = []
    original = cache.start_listing

    def recording(kind, raws, token, service_id=None):  # type: ignore[no-untyped-def]
        applied.append((token, service_id))
        return original(kind, raws, token, service_id=service_id)

    cache.start_listing = recording  # type: ignore[method-assign]
    poller.hint(o.SVC_WEB)
    poller.hint(None)
    poller.poll_once()
    poller.hint(o.SVC_DB)
    poller.poll_once()
    assert [scope for _, scope in applied] == [None, o.SVC_DB]
    assert all(token < after for (token, _), after in zip(applied, lister.tokens_after, strict=True))


def test_a_changed_task_reaches_the_cache_through_a_scoped_listing(poller: TaskPoller, lister: Lister,
                                                                   cache: Cache) -> None:
    lister.tasks = [t for t in lister.tasks if t["ID"] != o.TASK_WEB_1]
    lister.tasks.append(o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, state="failed", version=99))
    poller.hint_event(container_event(o.SVC_WEB))
    poller.poll_once()
    entry = cache.get(K.TASK, o.TASK_WEB_1)
    assert entry is not None and entry.activation["state"] == "failed"


# --------------------------------------------------------------------------- the loop
@pytest.fixture
def looping(lister: Lister, cache: Cache) -> Iterator[tuple[TaskPoller, list[Exception]]]:
    failures: list[Exception] = []
    poller = TaskPoller(lambda: lister, cache, lambda: True, failures.append,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.01, follow_ups=(), counts_interval=30, sweep_interval=30))
    greenlet = gevent.spawn(poller.run)
    yield poller, failures
    poller.stop()
    greenlet.join(2)
    assert greenlet.dead


def test_the_loop_lists_a_hinted_service_promptly(looping: tuple[TaskPoller, list[Exception]],
                                                  lister: Lister) -> None:
    poller, _ = looping
    poller.hint(o.SVC_DB)
    wait_until(lambda: listed(lister) == [o.SVC_DB], 1, message="the scoped listing")


def test_an_engine_failure_is_reported_and_the_loop_goes_on(looping: tuple[TaskPoller, list[Exception]],
                                                            lister: Lister) -> None:
    poller, failures = looping
    lister.fail = EngineUnavailable("connection refused")
    poller.hint(o.SVC_DB)
    wait_until(lambda: failures, 1, message="the failure callback")
    assert isinstance(failures[0], EngineUnavailable)
    lister.fail = None
    poller.hint(o.SVC_WEB)
    wait_until(lambda: o.SVC_WEB in listed(lister), 1, message="the next listing")


def test_a_removed_service_is_no_failure_and_its_tasks_are_found_by_a_full_listing(
        looping: tuple[TaskPoller, list[Exception]], lister: Lister, cache: Cache) -> None:
    """The engine answers 404 to a listing scoped to a removed service while it still reaps the tasks;
    treating that as a broken connection closed the event stream (Cache-Freshness stale for 1-2 s)."""
    poller, failures = looping
    lister.gone = {o.SVC_WEB, o.SVC_DB}
    lister.tasks = [t for t in lister.tasks if t["ServiceID"] != o.SVC_WEB]
    poller.hint(o.SVC_WEB)
    poller.hint(o.SVC_DB)
    wait_until(lambda: None in listed(lister), 1, message="the full listing")
    gevent.sleep(0.05)   # not a wait: a window in which no failure and no second listing may come
    assert failures == []
    assert listed(lister) == [None], "one full listing stands in for both removed services"
    assert not cache.task_ids_of_service(o.SVC_WEB)


def test_a_listing_with_many_changes_is_applied_in_parts_with_turns_between(cache: Cache) -> None:
    """A service scaled to thousands of tasks: the changes are written in parts of ``apply_step`` objects
    and the poller gives the event loop a turn between two, so no request waits for the whole listing."""
    bulk = [o.task(o.engine_id(f"bulk{i:04d}"), o.SVC_WEB, o.NODE_WORKER, slot=i + 10, state="pending")
            for i in range(1000)]
    seen_between: list[int] = []
    lister = Lister(bulk, cache)
    poller = TaskPoller(lambda: lister, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(), apply_step=100),
                        pause=lambda: seen_between.append(len(cache.task_ids_of_service(o.SVC_WEB))))
    poller.hint(o.SVC_WEB)
    poller.poll_once()
    assert len(cache.task_ids_of_service(o.SVC_WEB)) == 1000
    assert len(seen_between) >= 9                                   # ≥ 10 parts, a turn between two
    assert seen_between == sorted(seen_between) and seen_between[0] < 1000   # other greenlets saw progress


def test_a_bug_in_applying_propagates_to_the_supervisor(poller: TaskPoller, cache: Cache) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    cache.start_listing = broken  # type: ignore[method-assign]
    poller.hint(o.SVC_WEB)
    with pytest.raises(RuntimeError):
        poller.poll_once()


def test_nothing_is_listed_while_not_ready(lister: Lister, cache: Cache) -> None:
    poller = TaskPoller(lambda: lister, cache, lambda: False, lambda exc: None,  # type: ignore[arg-type,return-value]
                        TaskPollSettings(debounce=0.0, follow_ups=(), counts_interval=0.01, sweep_interval=0.02))
    greenlet = gevent.spawn(poller.run)
    poller.hint(o.SVC_WEB)
    gevent.sleep(0.1)   # not a wait: several sweep intervals in which nothing may be listed
    poller.stop()
    greenlet.join(1)
    assert lister.calls == []


# --------------------------------------------------------------------------- off the hub
def test_the_docker_client_decodes_and_indexes_listings_in_the_threadpool(
        monkeypatch: pytest.MonkeyPatch, objects: dict[ResourceKind, list[Raw]]) -> None:
    import json

    from app.engine import client as client_module

    threads: list[int] = []
    original = client_module.decode_array

    def recording(body: bytes) -> list[Raw]:
        threads.append(threading.get_ident())
        return original(body)

    monkeypatch.setattr(client_module, "decode_array", recording)
    engine = client_module.DockerEngine("unix:///nonexistent.sock")
    body = json.dumps(objects[K.TASK]).encode()
    monkeypatch.setattr(engine, "_get_body", lambda path, params: body)
    listing = engine.list_tasks(o.SVC_WEB)
    hub_thread = gevent.get_hub().thread_ident
    assert threads and all(ident != hub_thread for ident in threads)
    assert set(listing.versions) == {t["ID"] for t in objects[K.TASK] if t["ServiceID"] == o.SVC_WEB}


def test_a_listing_from_the_threadpool_is_freed_as_soon_as_it_is_dropped(
        monkeypatch: pytest.MonkeyPatch, objects: dict[ResourceKind, list[Raw]]) -> None:
    """gevent's threadpool keeps a returned value in a reference cycle: a 10,000-task listing outlived its
    use until a collection walked its ~70,000 objects on the hub. Dropped, it must be gone at once."""
    import gc
    import json

    from app.engine import client as client_module

    engine = client_module.DockerEngine("unix:///nonexistent.sock")
    body = json.dumps(objects[K.TASK]).encode()
    monkeypatch.setattr(engine, "_get_body", lambda path, params: body)

    def listings() -> int:
        return sum(isinstance(x, Listing) for x in gc.get_objects())

    gc.collect()
    gc.disable()
    try:
        before = listings()
        listing = engine.list_tasks()
        assert len(listing) == len(objects[K.TASK])
        assert listings() == before + 1
        del listing
        assert listings() == before
    finally:
        gc.enable()


# --------------------------------------------------------------------------- the sweep of a cluster at rest
class Sweeper(Lister):
    """A Lister whose full listings come with a body digest, as ``DockerEngine.list_tasks_changed``."""

    def __init__(self, tasks: list[Raw], cache: Cache) -> None:
        super().__init__(tasks, cache)
        self.decoded = 0

    def list_tasks_changed(self, digest: bytes | None) -> tuple[Listing | None, bytes]:
        import hashlib
        import json

        self.calls.append(("sweep", None))
        current = hashlib.blake2b(json.dumps(self.tasks, sort_keys=True).encode(), digest_size=16).digest()
        if current == digest:
            return None, current
        self.decoded += 1
        return prepare_listing(K.TASK, [dict(t) for t in self.tasks]), current


def test_an_unchanged_sweep_is_not_decoded_until_the_body_or_the_cache_changes(
        cache: Cache, objects: dict[ResourceKind, list[Raw]], clock: Clock) -> None:
    """At rest, the 60 s sweep of 10,000 tasks decoded 6.8 MB (~100 ms of CPU) to find nothing: the same
    body while the cache has not changed since the last applied sweep has nothing to apply."""
    sweeper = Sweeper(objects[K.TASK], cache)
    poller = TaskPoller(lambda: sweeper, cache, lambda: True, lambda exc: None,  # type: ignore[arg-type,return-value]
                        SETTINGS, clock=clock)

    def sweep() -> None:
        poller.hint(None)
        poller.poll_once()

    sweep()
    sweep()
    assert (sweeper.decoded, poller.stats.unchanged_sweeps) == (1, 1)
    # the cache changes (a scoped listing saw a task fail): the same body must be decoded and applied again
    sweeper.tasks = [t for t in sweeper.tasks if t["ID"] != o.TASK_WEB_1] + [
        o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, state="failed", version=99)]
    poller.hint(o.SVC_WEB)
    poller.poll_once()
    sweep()
    assert sweeper.decoded == 2
    sweep()
    assert (sweeper.decoded, poller.stats.unchanged_sweeps) == (2, 2)
    reaped = sweeper.tasks[0]["ID"]
    sweeper.tasks = sweeper.tasks[1:]   # the engine changed (a task reaped): a different body
    sweep()
    assert sweeper.decoded == 3 and cache.get(K.TASK, reaped) is None
    assert poller.stats.full_listings == 5
