"""The resource notifier with fake subscribers: which URIs a change touches, ACL per subscriber (a hidden
object's change never reaches it, a removal judged by the recorded state), list_changed on create and remove,
coalescing to one notification per (subscriber, URI) per 100 ms, the overflow path, and the real greenlet."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from app.acl.source import load_text
from app.cache.store import Cache
from app.mcp import notifications, registry
from app.mcp.notifications import MAX_PENDING, WINDOW, Notifier
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.mcp.test_resources_support import POLICY, FakeSubscriber, identity
from tests.unit.objects import cluster
from tests.unit.support import build_harness, wait_until

SERVICE_DB = f"service://services/{o.SVC_DB}"
SERVICE_MONITOR = f"service://services/{o.SVC_MONITOR}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app() -> Flask:
    return Flask("notify-test")


@pytest.fixture
def notifier(app: Flask, synced_cache: Cache, clock: Clock) -> Iterator[Notifier]:
    policy = load_text(json.dumps(POLICY), "inline")
    made = Notifier(app, synced_cache, clock=clock, policy_of=lambda: policy, auth_enabled=True)
    made.stop()    # no greenlet: the tests run the passes themselves
    unsubscribe = synced_cache.subscribe(made.on_changes)
    yield made
    unsubscribe()


def subscriber(app: Flask, user: str, *uris: str, list_changed: bool = False) -> FakeSubscriber:
    made = FakeSubscriber(identity(user), set(uris), list_changed)
    registry.subscribers(app).add(made)
    return made


def relabel(cache: Cache, kind: ResourceKind, object_id: str, value: str) -> None:
    entry = cache.get(kind, object_id)
    assert entry is not None
    raw: dict[str, Any] = copy.deepcopy(entry.raw)
    raw["Version"]["Index"] += 1
    raw["Spec"].setdefault("Labels", {})["touched"] = value
    cache.upsert(kind, raw)


def test_an_update_reaches_the_subscribers_of_its_uri_by_id_and_by_name(app: Flask, synced_cache: Cache,
                                                                         notifier: Notifier) -> None:
    by_id = subscriber(app, "root", SERVICE_DB)
    by_name = subscriber(app, "root", "service://services/shop_db")
    other = subscriber(app, "root", SERVICE_MONITOR)
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    notifier.run_once()
    assert by_id.updated() == [SERVICE_DB]
    assert by_name.updated() == ["service://services/shop_db"]
    assert other.received == []


def test_a_hidden_objects_change_never_reaches_a_subscriber(app: Flask, synced_cache: Cache,
                                                            notifier: Notifier) -> None:
    alice = subscriber(app, "alice", SERVICE_DB, SERVICE_MONITOR, "service://stacks/shop", list_changed=True)
    bob = subscriber(app, "bob", SERVICE_DB, SERVICE_MONITOR, "service://stacks/shop", list_changed=True)
    nobody = subscriber(app, "nobody", SERVICE_DB, "service://cluster", "service://history", list_changed=True)
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_MONITOR, "1")
    notifier.run_once()
    assert sorted(alice.updated()) == [SERVICE_DB, "service://stacks/shop"]   # the stack shows its members
    assert bob.updated() == [SERVICE_MONITOR]
    assert nobody.received == []
    assert alice.list_changes() == bob.list_changes() == 0   # updates change no list


def test_a_policy_reload_is_followed(app: Flask, synced_cache: Cache, clock: Clock) -> None:
    policies = [load_text(json.dumps(POLICY), "inline")]
    made = Notifier(app, synced_cache, clock=clock, policy_of=lambda: policies[-1], auth_enabled=True)
    made.stop()
    unsubscribe = synced_cache.subscribe(made.on_changes)
    try:
        alice = subscriber(app, "alice", SERVICE_MONITOR)
        relabel(synced_cache, ResourceKind.SERVICE, o.SVC_MONITOR, "1")
        made.run_once()
        assert alice.received == []
        widened = {"grants": [*POLICY["grants"], {"resources": ["service:monitor"], "audience": ["user:alice"],
                                                  "permissions": ["read"]}]}
        policies.append(load_text(json.dumps(widened), "inline"))
        clock.now += 1
        relabel(synced_cache, ResourceKind.SERVICE, o.SVC_MONITOR, "2")
        made.run_once()
        assert alice.updated() == [SERVICE_MONITOR]
    finally:
        unsubscribe()


def test_create_and_remove_send_list_changed_to_those_who_may_read_the_object(app: Flask, synced_cache: Cache,
                                                                               notifier: Notifier,
                                                                               clock: Clock) -> None:
    alice = subscriber(app, "alice", list_changed=True)
    bob = subscriber(app, "bob", list_changed=True)
    deaf = subscriber(app, "root", list_changed=False)
    synced_cache.upsert(ResourceKind.CONFIG, o.config(o.engine_id("cfgnew"), "shop_extra", stack="shop"))
    notifier.run_once()
    assert alice.list_changes() == 1 and bob.list_changes() == 0 and deaf.received == []
    clock.now += 1
    synced_cache.remove(ResourceKind.CONFIG, o.engine_id("cfgnew"))   # judged by its recorded stack label
    notifier.run_once()
    assert alice.list_changes() == 2 and bob.list_changes() == 0


def test_a_removed_object_is_judged_by_its_recorded_state(app: Flask, synced_cache: Cache,
                                                          notifier: Notifier) -> None:
    alice = subscriber(app, "alice", f"service://configs/{o.CFG_SHOP}", "service://configs/shop_nginx")
    bob = subscriber(app, "bob", f"service://configs/{o.CFG_SHOP}")
    synced_cache.remove(ResourceKind.CONFIG, o.CFG_SHOP)
    notifier.run_once()
    assert sorted(alice.updated()) == [f"service://configs/{o.CFG_SHOP}", "service://configs/shop_nginx"]
    assert bob.received == []


def test_a_task_state_change_touches_the_task_its_service_and_node(app: Flask, synced_cache: Cache,
                                                                   notifier: Notifier) -> None:
    watcher = subscriber(app, "root", f"service://tasks/{o.TASK_DB_1}", SERVICE_DB,
                         f"service://nodes/{o.NODE_WORKER}", SERVICE_MONITOR)
    task = copy.deepcopy(synced_cache.get(ResourceKind.TASK, o.TASK_DB_1).raw)  # type: ignore[union-attr]
    task["Version"]["Index"] += 1
    task["Status"]["State"] = "failed"
    synced_cache.upsert(ResourceKind.TASK, task)
    notifier.run_once()
    assert sorted(watcher.updated()) == sorted([f"service://tasks/{o.TASK_DB_1}", SERVICE_DB,
                                                f"service://nodes/{o.NODE_WORKER}"])


def test_notifications_are_coalesced_per_subscriber_and_uri(app: Flask, synced_cache: Cache, notifier: Notifier,
                                                            clock: Clock) -> None:
    fast = subscriber(app, "root", SERVICE_DB)
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    notifier.run_once()
    assert fast.updated() == [SERVICE_DB]          # the first goes out at once
    for step in range(5):                          # five more within the window: held
        clock.now += WINDOW / 10
        relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, f"{step + 2}")
        notifier.run_once()
    assert fast.updated() == [SERVICE_DB] and notifier.stats.coalesced == 5
    clock.now += WINDOW * 0.6                       # the window has ended: one for all five
    notifier.run_once()
    assert fast.updated() == [SERVICE_DB, SERVICE_DB]
    clock.now += WINDOW
    notifier.run_once()
    assert fast.updated() == [SERVICE_DB, SERVICE_DB]   # nothing new: nothing sent


def test_a_deferred_notification_is_dropped_when_the_subscriber_left(app: Flask, synced_cache: Cache,
                                                                     notifier: Notifier, clock: Clock) -> None:
    leaving = subscriber(app, "root", SERVICE_DB)
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    notifier.run_once()
    clock.now += WINDOW / 2
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "2")
    notifier.run_once()
    leaving.uris.clear()                           # unsubscribed within the window
    clock.now += WINDOW
    notifier.run_once()
    assert leaving.updated() == [SERVICE_DB]


def test_the_static_uris(app: Flask, synced_cache: Cache, notifier: Notifier) -> None:
    alice = subscriber(app, "alice", "service://cluster", "service://history")
    bob = subscriber(app, "bob", "service://cluster", "service://history")
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")     # alice may read it, bob may not
    notifier.run_once()
    assert sorted(alice.updated()) == ["service://cluster", "service://history"]
    assert bob.updated() == ["service://cluster"]


def test_a_full_queue_is_counted_not_blocking(app: Flask, synced_cache: Cache, notifier: Notifier) -> None:
    full = subscriber(app, "root", SERVICE_DB)
    full.full = True
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    notifier.run_once()
    assert notifier.stats.dropped == 1 and notifier.stats.sent == 0


def test_no_subscriber_no_work(app: Flask, synced_cache: Cache, notifier: Notifier) -> None:
    relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
    assert notifier._pending == []


def test_an_overflow_counts_everything_as_changed(app: Flask, synced_cache: Cache, notifier: Notifier) -> None:
    watcher = subscriber(app, "alice", f"service://volumes/{o.VOL_SHOP}", SERVICE_MONITOR, list_changed=True)
    notifier.on_changes([synced_cache.history.newest_first(None).__next__()] * (MAX_PENDING + 1))
    assert notifier._pending == [] and notifier.stats.overflows == 1
    notifier.run_once()
    assert watcher.updated() == [f"service://volumes/{o.VOL_SHOP}"] and watcher.list_changes() == 1


def test_the_greenlet_notifies_a_change_at_once(synced_cache: Cache) -> None:
    app = Flask("notify-live")
    live = Notifier(app, synced_cache)
    unsubscribe = synced_cache.subscribe(live.on_changes)
    try:
        watcher = subscriber(app, "anyone", SERVICE_DB)
        started = time.monotonic()
        relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "1")
        wait_until(lambda: watcher.updated(), timeout=1.0, interval=0.002)
        first = time.monotonic() - started
        relabel(synced_cache, ResourceKind.SERVICE, o.SVC_DB, "2")    # within the window: sent at its end
        wait_until(lambda: len(watcher.updated()) == 2, timeout=1.0, interval=0.002)
        second = time.monotonic() - started
        assert first < 0.05 and WINDOW * 0.9 <= second < WINDOW + 0.1, (first, second)
    finally:
        unsubscribe()
        live.stop()


def test_init_attaches_one_notifier_to_the_app_cache() -> None:
    harness = build_harness(FakeEngine(cluster()))
    harness.cache.replace_all(cluster())
    made = notifications.init(harness.app)
    try:
        assert notifications.init(harness.app) is made and notifications.notifier(harness.app) is made
        watcher = subscriber(harness.app, "anyone", SERVICE_DB)
        relabel(harness.cache, ResourceKind.SERVICE, o.SVC_DB, "1")
        wait_until(lambda: watcher.updated(), timeout=1.0, interval=0.005)
        assert watcher.updated() == [SERVICE_DB]
    finally:
        made.stop()
