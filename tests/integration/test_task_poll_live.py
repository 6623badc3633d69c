"""The TaskPoller on the lab engine (docs/responsiveness.md): with a service of 300 pending tasks beside a small running
one, a task state change is visible within 2 s through a listing of its own service only (the full sweep
and the counts signal are pushed out of the way), and the engine's task counts are read from
``/services?status=true``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from app.cache.store import Cache
from app.engine.client import DockerEngine
from app.engine.watcher import Watcher, WatcherSettings
from app.resources import ResourceKind
from tests.conftest import wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL, sleeper

pytestmark = pytest.mark.integration
K = ResourceKind
VISIBLE_WITHIN = 2.0
PENDING = 300
# No sweep and no counts during the test: only event hints and their follow-ups can list tasks.
SETTINGS = WatcherSettings(coalesce_window=0.02, task_poll_interval=3600.0, task_debounce=0.05,
                           task_sweep_interval=3600.0, resync_interval=3600.0, backoff_initial=0.1,
                           backoff_max=1.0)


@pytest.fixture(scope="module")
def client(docker_host: str) -> Iterator[docker.DockerClient]:
    made = docker.DockerClient(base_url=docker_host, version="1.41", timeout=60)
    yield made
    for service in made.services.list(filters={"label": f"{TEST_LABEL}=task-poll"}):
        service.remove()
    made.close()


@pytest.fixture(scope="module")
def services(client: docker.DockerClient) -> tuple[Any, Any]:
    suffix = uuid.uuid4().hex[:6]
    labels = {TEST_LABEL: "task-poll"}
    pending = client.services.create(
        IMAGE, ["sleep", "1000000"], name=f"shoal-it-pending-{suffix}", labels=labels,
        constraints=["node.labels.nonexistent==1"],
        mode=docker.types.ServiceMode("replicated", replicas=PENDING))
    probe = sleeper(client, f"shoal-it-probe-{suffix}", labels=labels,
                    restart_policy=docker.types.RestartPolicy("any", delay=0))
    wait_for(lambda: len(client.api.tasks(filters={"service": pending.id})) >= PENDING, 60, interval=0.5,
             message=f"{PENDING} pending tasks")
    return pending, probe


@pytest.fixture
def watcher(docker_host: str, services: tuple[Any, Any]) -> Iterator[Watcher]:
    cache = Cache()
    running = Watcher(lambda: DockerEngine(docker_host, "1.41"), cache, SETTINGS)
    running.start()
    wait_for(lambda: cache.freshness.synced and cache.freshness.connected, 30, message="first sync")
    yield running
    running.stop()


def _running_task(client: docker.DockerClient, service_id: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        for task in client.api.tasks(filters={"service": service_id, "desired-state": "running"}):
            if task["Status"]["State"] == "running" and task["Status"].get("ContainerStatus", {}).get("ContainerID"):
                return dict(task)
        return None

    return wait_for(found, 60, interval=0.1, message="a running probe task")  # type: ignore[return-value]


def test_a_task_state_change_is_visible_within_2s_through_a_scoped_listing(
        watcher: Watcher, client: docker.DockerClient, services: tuple[Any, Any]) -> None:
    pending, probe = services
    cache = watcher._cache
    assert len(cache.task_ids_of_service(pending.id)) == PENDING
    task = _running_task(client, probe.id)
    wait_for(lambda: (e := cache.get(K.TASK, task["ID"])) is not None and e.activation["state"] == "running",
             10, message="the probe task running in the cache")
    full_before = watcher.task_poller.stats.full_listings
    client.api.kill(task["Status"]["ContainerStatus"]["ContainerID"])
    engine_state = wait_for(lambda: (s := client.api.inspect_task(task["ID"])["Status"]["State"]) != "running"
                            and s, 10, interval=0.01, message="the engine to show the new state")
    seen_by_engine = time.monotonic()
    wait_for(lambda: (e := cache.get(K.TASK, task["ID"])) is not None and e.activation["state"] != "running",
             VISIBLE_WITHIN, interval=0.01, message=f"the cache to show {engine_state}")
    assert time.monotonic() - seen_by_engine <= VISIBLE_WITHIN
    stats = watcher.task_poller.stats
    assert stats.full_listings == full_before, "the change must come from a scoped listing, not a sweep"
    assert stats.listed.get(probe.id, 0) >= 1 and pending.id not in stats.listed


def test_the_engine_reports_task_counts_per_service(docker_host: str, services: tuple[Any, Any]) -> None:
    pending, probe = services
    counts = DockerEngine(docker_host, "1.41").service_counts()
    running, desired, _ = counts[pending.id]
    assert (running, desired) == (0, PENDING)
    assert counts[probe.id][1] == 1


def test_a_scoped_listing_holds_only_that_services_tasks(docker_host: str, services: tuple[Any, Any]) -> None:
    pending, _ = services
    listing = DockerEngine(docker_host, "1.41").list_tasks(pending.id)
    assert len(listing) == PENDING and {raw["ServiceID"] for raw in listing.raws} == {pending.id}


def test_removing_a_service_keeps_the_stream_live_and_drops_its_tasks(
        watcher: Watcher, client: docker.DockerClient) -> None:
    """The engine answers 404 to a task listing scoped to a removed service; that used to count as a broken
    connection (event stream closed, Cache-Freshness stale for 1-2 s)."""
    cache = watcher._cache
    service = sleeper(client, f"shoal-it-gone-{uuid.uuid4().hex[:6]}", replicas=2,
                      labels={TEST_LABEL: "task-poll"})
    wait_for(lambda: len(cache.task_ids_of_service(service.id)) == 2, 60, interval=0.1,
             message="the service's two tasks in the cache")
    reconnects, failures = watcher.stats.reconnects, watcher.task_poller.stats.failures
    service.remove()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        assert cache.freshness.connected, "the event stream was dropped after a service removal"
        time.sleep(0.02)   # not a wait: checks that the stream stays connected through the whole 3 s
    assert (watcher.stats.reconnects, watcher.task_poller.stats.failures) == (reconnects, failures)
    wait_for(lambda: not cache.task_ids_of_service(service.id), 30, interval=0.1,
             message="the removed service's tasks to leave the cache")
