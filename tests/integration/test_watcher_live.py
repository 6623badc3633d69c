"""The watcher against the real engine: full sync, changes visible within 2 s, removals become 404s."""

from __future__ import annotations

import time
import uuid

import docker
import pytest

from app.resources import ENGINE_KINDS, ResourceKind
from tests.conftest import wait_for
from tests.integration.engine_state import differences, engine_listing, sleeper

pytestmark = pytest.mark.integration
VISIBLE_WITHIN = 2.0


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


def test_full_sync_holds_every_kind_of_the_demo_workload(live_app, engine) -> None:
    _, runtime = live_app
    cache = runtime.cache
    for kind in ENGINE_KINDS:
        assert cache.count(kind) > 0, f"no {kind.value} cached"
    stacks = {entry.id for entry in cache.entries(ResourceKind.STACK)}
    assert len(stacks) >= 2, stacks
    kinds = tuple(k for k in ENGINE_KINDS if k is not ResourceKind.TASK)
    # An earlier module's clean-up may still be arriving as events: compare once the engine is quiet.
    wait_for(lambda: differences(cache, engine_listing(engine), kinds) == [], VISIBLE_WITHIN, interval=0.05,
             message="the cache to match the engine listing")
    assert differences(cache, engine_listing(engine), kinds) == []


def test_tasks_converge_to_the_engine_listing_within_2s(live_app, engine) -> None:
    _, runtime = live_app

    def converged() -> bool:
        return differences(runtime.cache, engine_listing(engine), (ResourceKind.TASK,)) == []

    wait_for(converged, 10, interval=0.2, message="task list equal to the engine's")


def _visible(runtime, kind: ResourceKind, object_id: str, present: bool = True) -> float:
    started = time.monotonic()
    wait_for(lambda: (runtime.cache.get(kind, object_id) is not None) == present, VISIBLE_WITHIN,
             interval=0.01, message=f"{kind.value} {object_id} {'present' if present else 'gone'}")
    return time.monotonic() - started


def test_created_service_appears_within_2s_and_is_404_after_removal(live_app, dclient) -> None:
    app, runtime = live_app
    client = app.test_client()
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    service = sleeper(dclient, name, replicas=1)
    try:
        _visible(runtime, ResourceKind.SERVICE, service.id)
        body = client.get(f"/services/{service.id}").get_json()
        assert body["service"]["Spec"]["Name"] == name
        assert body["@id"] == f"/services/{service.id}"
        wait_for(lambda: runtime.cache.tasks_of_service(service.id), VISIBLE_WITHIN, message="its task")
        detail = client.get(f"/services/{service.id}").get_json()
        assert [task["@id"].split("/")[1] for task in detail["tasks"]] == ["tasks"]
    finally:
        service.remove()
    _visible(runtime, ResourceKind.SERVICE, service.id, present=False)
    missing = client.get(f"/services/{service.id}")
    assert missing.status_code == 404
    assert missing.get_json()["type"] == "about:blank"


@pytest.mark.parametrize("kind", [ResourceKind.CONFIG, ResourceKind.SECRET])
def test_created_config_and_secret_appear_within_2s_without_payload(live_app, dclient, kind) -> None:
    app, runtime = live_app
    client = app.test_client()
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    payload = f"payload-{uuid.uuid4().hex}"
    collection = dclient.configs if kind is ResourceKind.CONFIG else dclient.secrets
    created = collection.create(name=name, data=payload.encode(), labels={"shoal.test": "1"})
    try:
        _visible(runtime, kind, created.id)
        response = client.get(f"/{kind.spec.plural}/{created.id}")
        assert response.status_code == 200
        body = response.get_json()
        assert body[kind.spec.detail_key]["Spec"]["Name"] == name
        assert body["services"] == []
        if kind is ResourceKind.SECRET:
            assert "Data" not in body["secret"]["Spec"]
            import base64
            assert base64.b64encode(payload.encode()).decode() not in response.get_data(as_text=True)
    finally:
        created.remove()
    _visible(runtime, kind, created.id, present=False)
    assert client.get(f"/{kind.spec.plural}/{created.id}").status_code == 404


def test_network_and_volume_appear_and_disappear(live_app, dclient) -> None:
    _, runtime = live_app
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    network = dclient.networks.create(name, driver="overlay", attachable=True, labels={"shoal.test": "1"})
    volume = dclient.volumes.create(name, labels={"shoal.test": "1"})
    try:
        _visible(runtime, ResourceKind.NETWORK, network.id)
        _visible(runtime, ResourceKind.VOLUME, volume.name)
    finally:
        network.remove()
        volume.remove()
    _visible(runtime, ResourceKind.NETWORK, network.id, present=False)
    _visible(runtime, ResourceKind.VOLUME, volume.name, present=False)


def test_scaling_a_service_changes_its_tasks_within_2s(live_app, dclient, engine) -> None:
    _, runtime = live_app
    service = sleeper(dclient, f"shoal-it-{uuid.uuid4().hex[:8]}", replicas=1)

    def engine_task_ids() -> set[str]:
        return {task["ID"] for task in engine.tasks(filters={"service": service.id})}

    def running_desired() -> int:
        return sum(1 for t in engine.tasks(filters={"service": service.id}) if t["DesiredState"] == "running")

    try:
        wait_for(lambda: len(runtime.cache.tasks_of_service(service.id)) >= 1, 10, message="first task")
        service.scale(3)
        wait_for(lambda: running_desired() == 3, 10, message="three tasks in the engine")
        expected = engine_task_ids()
        wait_for(lambda: {t.id for t in runtime.cache.tasks_of_service(service.id)} >= expected,
                 VISIBLE_WITHIN, interval=0.01, message="the engine's tasks in the cache")
    finally:
        service.remove()
