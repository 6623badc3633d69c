"""Watcher against a FakeEngine: initial sync, event-driven refreshes, task reconciliation without events,
engine loss (cached state kept, marked disconnected) and recovery with a diffing resync."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.engine.watcher import Watcher, WatcherSettings
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.support import FAST, wait_until

K = ResourceKind


class Running:
    """A started watcher, its cache, its engine and every change batch the cache emitted."""

    def __init__(self, engine: FakeEngine, settings: WatcherSettings = FAST) -> None:
        self.engine = engine
        self.cache = Cache()
        self.changes: list[Change] = []
        self.cache.subscribe(self.changes.extend)
        self.connects = 0
        self.watcher = Watcher(self._connect, self.cache, settings)

    def _connect(self) -> FakeEngine:
        self.connects += 1
        return self.engine

    def start(self) -> Running:
        self.watcher.start()
        wait_until(lambda: self.cache.freshness.synced, 5, message="first full sync")
        return self

    def stop(self) -> None:
        self.watcher.stop(timeout=2)

    def open_streams(self) -> int:
        return sum(1 for stream in self.engine.streams if not stream.closed)


@pytest.fixture
def running(fake_engine: FakeEngine) -> Iterator[Running]:
    started = Running(fake_engine).start()
    yield started
    started.stop()


def lose_engine(engine: FakeEngine) -> None:
    engine.available = False
    engine.close()  # ends the open event streams, like a daemon restart


# --------------------------------------------------------------------------- sync
def test_initial_sync_loads_every_kind_and_derives_stacks(running: Running) -> None:
    cache = running.cache
    for kind, raws in o.cluster().items():
        expected = {FakeEngine.key(kind, raw) for raw in raws}
        assert {entry.id for entry in cache.entries(kind)} == expected, kind
    assert [entry.id for entry in cache.entries(K.STACK)] == ["shop"]
    fresh = cache.freshness
    assert fresh.synced and fresh.connected and fresh.last_sync_duration is not None
    assert running.watcher.stats.full_syncs == 1
    assert running.open_streams() == 1


def test_initial_sync_redacts_secret_data(running: Running) -> None:
    entry = running.cache.get(K.SECRET, o.SEC_SHOP)
    assert entry is not None and "Data" not in entry.raw["Spec"]


# --------------------------------------------------------------------------- events
def test_a_create_event_makes_the_new_object_appear(running: Running) -> None:
    running.engine.objects[K.SERVICE]["newsvc"] = o.service("newsvc", "shop_cache", stack="shop")
    running.engine.emit("service", "create", "newsvc")
    entry = wait_until(lambda: running.cache.get(K.SERVICE, "newsvc"), 2, message="the new service")
    assert entry.name == "shop_cache"
    stack = running.cache.get(K.STACK, "shop")
    assert stack is not None and "newsvc" in stack.raw["services"]


def test_an_update_event_refreshes_the_object(running: Running) -> None:
    running.engine.objects[K.NODE][o.NODE_WORKER] = o.node(o.NODE_WORKER, "worker-1", availability="pause",
                                                           version=11)
    running.engine.emit("node", "update", o.NODE_WORKER)

    def paused() -> bool:
        entry = running.cache.get(K.NODE, o.NODE_WORKER)
        return entry is not None and entry.activation["availability"] == "pause"

    wait_until(paused, 2, message="the node update")
    assert (K.NODE, Action.UPDATE, o.NODE_WORKER) in {(c.kind, c.action, c.id) for c in running.changes}


def test_a_remove_event_removes_the_object_when_inspect_finds_nothing(running: Running) -> None:
    del running.engine.objects[K.CONFIG][o.CFG_OTHER]
    running.engine.emit("config", "remove", o.CFG_OTHER)
    wait_until(lambda: running.cache.get(K.CONFIG, o.CFG_OTHER) is None, 2, message="the config removal")
    removed = [c for c in running.changes if c.action is Action.REMOVE]
    assert [(c.kind, c.id) for c in removed] == [(K.CONFIG, o.CFG_OTHER)]


def test_a_container_event_with_a_task_label_refreshes_that_task(fake_engine: FakeEngine) -> None:
    slow_polling = replace(FAST, task_poll_interval=60.0)
    running = Running(fake_engine, slow_polling).start()
    try:
        fake_engine.objects[K.TASK][o.TASK_WEB_1] = o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER,
                                                           state="failed", version=31)
        fake_engine.emit("container", "die", "c" * 64, **{"com.docker.swarm.task.id": o.TASK_WEB_1})

        def failed() -> bool:
            entry = running.cache.get(K.TASK, o.TASK_WEB_1)
            return entry is not None and entry.activation["state"] == "failed"

        wait_until(failed, 2, message="the task refresh")
    finally:
        running.stop()


def test_exec_events_do_not_trigger_inspection(running: Running) -> None:
    calls: list[tuple[ResourceKind, str]] = []
    original = running.engine.inspect

    def counting(kind: ResourceKind, object_id: str):  # type: ignore[no-untyped-def]
        calls.append((kind, object_id))
        return original(kind, object_id)

    running.engine.inspect = counting  # type: ignore[method-assign]
    for _ in range(5):
        running.engine.emit("container", "exec_start: /bin/true", "c" * 64,
                            **{"com.docker.swarm.task.id": o.TASK_WEB_1})
    running.engine.emit("config", "update", o.CFG_SHOP)  # a marker that is inspected
    wait_until(lambda: calls, 2, message="the marker inspection")
    assert calls == [(K.CONFIG, o.CFG_SHOP)]
    assert running.watcher.stats.events_received == 6


def test_events_for_the_same_object_are_coalesced(fake_engine: FakeEngine) -> None:
    coalescing = replace(FAST, coalesce_window=0.2)
    running = Running(fake_engine, coalescing).start()
    calls: list[tuple[ResourceKind, str]] = []
    original = fake_engine.inspect

    def counting(kind: ResourceKind, object_id: str):  # type: ignore[no-untyped-def]
        calls.append((kind, object_id))
        return original(kind, object_id)

    fake_engine.inspect = counting  # type: ignore[method-assign]
    try:
        for _ in range(10):
            fake_engine.emit("service", "update", o.SVC_WEB)
        wait_until(lambda: running.watcher.stats.events_received == 10, 2, message="the events")
        wait_until(lambda: calls, 2, message="the inspection")
        assert calls == [(K.SERVICE, o.SVC_WEB)]
    finally:
        running.stop()


# --------------------------------------------------------------------------- tasks without events
def test_task_states_are_reconciled_without_any_event(running: Running) -> None:
    seq = running.cache.freshness.seq
    tasks = running.engine.objects[K.TASK]
    tasks[o.TASK_MON_WORKER] = o.task(o.TASK_MON_WORKER, o.SVC_MONITOR, o.NODE_WORKER, slot=None,
                                      state="running", version=31)
    tasks["brandnewtask"] = o.task("brandnewtask", o.SVC_WEB, o.NODE_WORKER, slot=3)
    del tasks[o.TASK_DB_OLD]

    def reconciled() -> bool:
        cache = running.cache
        entry = cache.get(K.TASK, o.TASK_MON_WORKER)
        return (entry is not None and entry.activation["state"] == "running"
                and cache.get(K.TASK, "brandnewtask") is not None
                and cache.get(K.TASK, o.TASK_DB_OLD) is None)

    wait_until(reconciled, 1.9, message="task reconciliation by polling")
    assert running.watcher.stats.events_received == 0
    primary = {c.kind for c in running.changes if c.seq > seq and c.action is not Action.REF_CHANGED}
    assert primary == {K.TASK}


def test_a_service_event_reconciles_the_task_list_soon(fake_engine: FakeEngine) -> None:
    running = Running(fake_engine, replace(FAST, task_poll_interval=60.0)).start()
    try:
        fake_engine.objects[K.TASK]["scaledup"] = o.task("scaledup", o.SVC_WEB, o.NODE_WORKER, slot=3)
        fake_engine.emit("service", "update", o.SVC_WEB)
        wait_until(lambda: running.cache.get(K.TASK, "scaledup"), 2, message="the new task")
    finally:
        running.stop()


# --------------------------------------------------------------------------- engine loss and recovery
def test_engine_loss_marks_the_cache_disconnected_and_keeps_the_data(running: Running) -> None:
    counts = {kind: running.cache.count(kind) for kind in ResourceKind}
    seq = running.cache.freshness.seq
    lose_engine(running.engine)
    wait_until(lambda: not running.cache.freshness.connected, 2, message="the disconnect")
    fresh = running.cache.freshness
    assert fresh.synced  # the first sync happened; the state is stale, not absent
    assert {kind: running.cache.count(kind) for kind in ResourceKind} == counts
    assert fresh.seq == seq
    assert running.watcher.stats.reconnects >= 1


def test_engine_loss_stops_task_polling_from_changing_the_cache(running: Running) -> None:
    lose_engine(running.engine)
    wait_until(lambda: not running.cache.freshness.connected, 2, message="the disconnect")
    seq = running.cache.freshness.seq
    running.engine.objects[K.TASK].clear()  # invisible while unavailable
    wait_until(lambda: running.watcher.stats.reconnects >= 3, 2, message="a few reconnection attempts")
    assert running.cache.freshness.seq == seq
    assert running.cache.count(K.TASK) == 7


def test_recovery_resyncs_with_the_right_changes(running: Running) -> None:
    lose_engine(running.engine)
    wait_until(lambda: not running.cache.freshness.connected, 2, message="the disconnect")
    seq = running.cache.freshness.seq
    engine = running.engine
    # While the engine was away: a service appeared, a config went, a node changed.
    engine.objects[K.SERVICE]["latecomer"] = o.service("latecomer", "latecomer")
    del engine.objects[K.CONFIG][o.CFG_OTHER]
    engine.objects[K.NODE][o.NODE_DOWN] = o.node(o.NODE_DOWN, "worker-2", state="ready", version=12)
    engine.available = True
    wait_until(lambda: running.cache.freshness.connected, 2, message="the reconnect")
    wait_until(lambda: running.watcher.stats.full_syncs >= 2, 2, message="the resync")
    after = {(c.kind, c.action, c.id) for c in running.changes if c.seq > seq}
    assert after == {(K.SERVICE, Action.CREATE, "latecomer"), (K.CONFIG, Action.REMOVE, o.CFG_OTHER),
                     (K.NODE, Action.UPDATE, o.NODE_DOWN)}
    node = running.cache.get(K.NODE, o.NODE_DOWN)
    assert node is not None and node.activation["state"] == "ready"
    assert running.open_streams() == 1  # the new stream is followed again
    engine.objects[K.VOLUME]["after_recovery"] = o.volume("after_recovery")
    engine.emit("volume", "create", "after_recovery")
    wait_until(lambda: running.cache.get(K.VOLUME, "after_recovery"), 2, message="an event after recovery")


def test_an_engine_down_at_start_is_retried_until_it_answers(fake_engine: FakeEngine) -> None:
    fake_engine.available = False
    running = Running(fake_engine)
    running.watcher.start()
    try:
        wait_until(lambda: running.watcher.stats.reconnects >= 2, 2, message="retries")
        assert not running.cache.freshness.synced
        assert running.cache.count(K.NODE) == 0
        fake_engine.available = True
        wait_until(lambda: running.cache.freshness.synced, 2, message="the first sync after the outage")
        assert running.cache.freshness.connected
        assert running.cache.count(K.NODE) == 3
    finally:
        running.stop()


def test_a_failing_task_listing_hands_reconnection_to_the_event_loop(running: Running) -> None:
    original = running.engine.list
    failures = []

    def failing_tasks(kind: ResourceKind):  # type: ignore[no-untyped-def]
        if kind is K.TASK and not failures:
            failures.append(kind)
            from app.engine.client import EngineUnavailable
            raise EngineUnavailable("tasks listing failed")
        return original(kind)

    running.engine.list = failing_tasks  # type: ignore[method-assign]
    wait_until(lambda: failures, 2, message="the failing task listing")
    wait_until(lambda: running.watcher.stats.full_syncs >= 2, 2, message="the resync after the failure")
    assert running.cache.freshness.connected


# --------------------------------------------------------------------------- stop
def test_stop_ends_every_greenlet_and_closes_the_stream(fake_engine: FakeEngine) -> None:
    running = Running(fake_engine).start()
    running.stop()
    assert all(greenlet.dead for greenlet in running.watcher._greenlets)
    assert running.open_streams() == 0


def test_the_connection_is_made_once_and_reused(running: Running) -> None:
    running.engine.emit("config", "update", o.CFG_SHOP)
    wait_until(lambda: running.watcher.stats.events_received == 1, 2, message="the event")
    assert running.connects == 1


def test_default_poll_interval_reconciles_tasks_within_two_seconds(fake_engine: FakeEngine) -> None:
    default_polling = replace(FAST, task_poll_interval=WatcherSettings().task_poll_interval)
    running = Running(fake_engine, default_polling).start()
    try:
        fake_engine.objects[K.TASK][o.TASK_WEB_2] = o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2,
                                                           state="complete", desired="shutdown", version=32)

        def completed() -> bool:
            entry = running.cache.get(K.TASK, o.TASK_WEB_2)
            return entry is not None and entry.activation["state"] == "complete"

        wait_until(completed, 2.0, message="task reconciliation at the default interval")
    finally:
        running.stop()
