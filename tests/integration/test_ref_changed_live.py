"""ref_changed records from real engine changes (docs/cache-exactness.md): a service starting and stopping to use a
config, its tasks appearing; every batch the cache emits is exact (no ref_changed for an object the same
write changed itself, one per object, after the causing changes)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import docker
import pytest

from app.cache.history import Action, Change
from app.resources import ResourceKind
from tests.conftest import wait_for
from tests.integration.engine_state import TEST_LABEL, sleeper

pytestmark = pytest.mark.integration
K = ResourceKind


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture
def batches(live_app) -> Iterator[list[list[Change]]]:  # type: ignore[no-untyped-def]
    _, runtime = live_app
    seen: list[list[Change]] = []
    unsubscribe = runtime.cache.subscribe(seen.append)
    yield seen
    unsubscribe()


def ref_records(batches: list[list[Change]], kind: ResourceKind, object_id: str) -> list[Change]:
    return [c for batch in batches for c in batch
            if c.action is Action.REF_CHANGED and c.kind is kind and c.id == object_id]


def task_moved_alone(batches: list[list[Change]], service_id: str) -> list[list[Change]]:
    """The batches that changed a task of the service without changing the service itself."""
    def of_service(change: Change) -> bool:
        return any((side or {}).get("ServiceID") == service_id for side in (change.before, change.after))

    return [batch for batch in batches
            if any(c.kind is K.TASK and c.action is not Action.REF_CHANGED and of_service(c) for c in batch)
            and not any(c.kind is K.SERVICE and c.id == service_id and c.action is not Action.REF_CHANGED
                        for c in batch)]


def assert_exact(batches: list[list[Change]]) -> None:
    for batch in batches:
        own = {(c.kind, c.id) for c in batch if c.action is not Action.REF_CHANGED}
        refs = [(c.kind, c.id) for c in batch if c.action is Action.REF_CHANGED]
        assert not own & set(refs), batch
        assert len(refs) == len(set(refs)), batch
        flags = [c.action is Action.REF_CHANGED for c in batch]
        assert flags == sorted(flags), batch


def test_a_service_using_a_config_and_its_tasks_record_ref_changed(live_app, dclient, batches) -> None:
    app, runtime = live_app
    cache, client = runtime.cache, app.test_client()
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    config = dclient.configs.create(name=name, data=b"x", labels={TEST_LABEL: "1"})
    service = None
    try:
        wait_for(lambda: cache.get(K.CONFIG, config.id), 5, message="the config")
        assert cache.ref_changed_at(K.CONFIG, config.id) is None
        reference = docker.types.ConfigReference(config.id, name, filename="/etc/shoal-it")
        service = sleeper(dclient, name, replicas=1, configs=[reference])
        wait_for(lambda: ref_records(batches, K.CONFIG, config.id), 5, message="ref_changed of the config")
        wait_for(lambda: cache.ref_changed_at(K.CONFIG, config.id), 1, message="its time")
        detail = client.get(f"/configs/{config.id}").get_json()
        assert [ref["id"] for ref in detail["services"]] == [service.id]

        # The service's detail lists its tasks: their arrival is a ref_changed of the service.
        # (A full sync may apply the service and its first task in one write: then the service's own
        # create carries the task and no ref_changed is due; the task's later states still are.)
        wait_for(lambda: cache.tasks_of_service(service.id), 10, message="the service's task")
        wait_for(lambda: any(ref_records([batch], K.SERVICE, service.id)
                             for batch in task_moved_alone(batches, service.id)), 15,
                 message="a task change recorded as ref_changed of its service")
        assert cache.ref_changed_at(K.SERVICE, service.id) is not None

        # The service stops using the config: the config's detail changes again.
        before = len(ref_records(batches, K.CONFIG, config.id))
        service.update(configs=[])
        wait_for(lambda: len(ref_records(batches, K.CONFIG, config.id)) > before, 5,
                 message="ref_changed of the config after the service dropped it")
        wait_for(lambda: client.get(f"/configs/{config.id}").get_json()["services"] == [], 5,
                 message="the config's detail without the service")
    finally:
        if service is not None:
            service.remove()
        wait_for(lambda: service is None or cache.get(K.SERVICE, service.id) is None, 5, message="service gone")
        config.remove()
    wait_for(lambda: cache.get(K.CONFIG, config.id) is None, 5, message="config gone")
    assert cache.ref_changed_at(K.CONFIG, config.id) is None  # cleaned with the object
    assert_exact(batches)
