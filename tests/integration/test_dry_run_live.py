"""``?dryRun=true`` on REST writes against gunicorn (level 3) on the lab swarm: the engine objects stay as they
were (``docker inspect``: the same ``Version.Index``, the object still there), the answer says what would
change, the history records nothing, and a write without a dry run refuses it (400 API022)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import TEST_LABEL, sleeper

pytestmark = pytest.mark.integration
JSON = {"Accept": "application/json"}
MERGE = {**JSON, "Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def base(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("gunicorn-dry-run")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_OPERATIONS_LEVEL="3", SERVICE_DATA_DIR=str(tmp / "state"))
    proc = launch_gunicorn(env, tmp / "server.log", url)
    yield url
    stop_gunicorn(proc, tmp / "server.log")


@pytest.fixture
def service(dclient: docker.DockerClient, base: str) -> Iterator[str]:
    created = sleeper(dclient, f"t-dry-{uuid.uuid4().hex[:6]}", replicas=1)
    wait_for(lambda: requests.get(f"{base}/services/{created.id}", headers=JSON, timeout=5).status_code == 200,
             15, message="the cache to hold the service")
    yield created.id
    created.remove()


def _dry(response: requests.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["dryRun"] is True and body["@type"] == "WriteDryRun"
    return body


def _history(base: str, kind: str, object_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = requests.get(f"{base}/history", params={"type": kind, "resourceId": object_id},
                                               headers=JSON, timeout=10).json()["items"]
    return items


def test_service_updates_and_removal_change_nothing(base: str, service: str, engine: docker.APIClient) -> None:
    before = engine.inspect_service(service)
    history = _history(base, "service", service)
    scale = _dry(requests.put(f"{base}/services/{service}/scale?dryRun=true", json={"replicas": 3}, headers=JSON,
                              timeout=10))
    assert scale["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 1, "new": 3}]
    assert scale["summary"] == "replicas 1→3" and scale["target"]["id"] == service
    env = _dry(requests.patch(f"{base}/services/{service}/env?dryRun=true", data=b'{"A":"1"}', headers=MERGE,
                              timeout=10))
    assert env["changes"] == [{"field": 'Spec.TaskTemplate.ContainerSpec.Env["A"]', "new": "1"}]
    image = _dry(requests.put(f"{base}/services/{service}/image?dryRun=true", json={"image": "other:1"},
                              headers=JSON, timeout=10))
    assert image["changes"][0]["field"] == "Spec.TaskTemplate.ContainerSpec.Image"
    restart = _dry(requests.post(f"{base}/services/{service}/restart?dryRun=true", headers=JSON, timeout=10))
    assert restart["changes"][0]["field"] == "Spec.TaskTemplate.ForceUpdate"
    removal = _dry(requests.delete(f"{base}/services/{service}?dryRun=true", headers=JSON, timeout=10))
    assert removal["action"] == "remove" and removal["removes"][0]["id"] == service
    bad = requests.put(f"{base}/services/{service}/scale?dryRun=true", json={"replicas": -2}, headers=JSON,
                       timeout=10)
    assert bad.status_code == 400 and bad.json()["code"] == "SVC004"
    after = engine.inspect_service(service)
    assert after["Version"]["Index"] == before["Version"]["Index"] and after["Spec"] == before["Spec"]
    assert _history(base, "service", service) == history


def test_node_objects_creates_and_swarm_settings(base: str, engine: docker.APIClient,
                                                 dclient: docker.DockerClient) -> None:
    node_id = engine.info()["Swarm"]["NodeID"]
    node_version = engine.inspect_node(node_id)["Version"]["Index"]
    drain = _dry(requests.put(f"{base}/nodes/{node_id}/availability?dryRun=true", json={"availability": "drain"},
                              headers=JSON, timeout=10))
    assert {"field": "Spec.Availability", "old": "active", "new": "drain"} in drain["changes"]
    labels = _dry(requests.patch(f"{base}/nodes/{node_id}/labels?dryRun=true", data=b'{"zone":"a"}', headers=MERGE,
                                 timeout=10))
    assert labels["changes"] == [{"field": 'Spec.Labels["zone"]', "new": "a"}]
    assert engine.inspect_node(node_id)["Version"]["Index"] == node_version

    suffix = uuid.uuid4().hex[:6]
    volume = dclient.volumes.create(f"t-dry-vol-{suffix}", labels={TEST_LABEL: "1"})
    try:
        wait_for(lambda: requests.get(f"{base}/volumes/{volume.name}", headers=JSON, timeout=5).status_code == 200,
                 15, message="the cache to hold the volume")
        gone = _dry(requests.delete(f"{base}/volumes/{volume.name}?dryRun=true", headers=JSON, timeout=10))
        assert gone["removes"] == [{"type": "volume", "id": volume.name, "name": volume.name,
                                    "@id": f"/volumes/{volume.name}"}]
        assert engine.inspect_volume(volume.name)["Name"] == volume.name
    finally:
        volume.remove()
    name = f"t-dry-cfg-{suffix}"
    data = base64.b64encode(b"hello").decode()
    create = _dry(requests.post(f"{base}/configs?dryRun=true", json={"name": name, "data": data}, headers=JSON,
                                timeout=10))
    assert create["action"] == "create" and create["creates"]["spec"]["Name"] == name
    secret = _dry(requests.post(f"{base}/secrets?dryRun=true", json={"name": name, "data": data}, headers=JSON,
                                timeout=10))
    assert "Data" not in secret["creates"]["spec"]
    assert not [c for c in dclient.configs.list() if c.name == name]
    assert not [s for s in dclient.secrets.list() if s.name == name]

    swarm_version = engine.inspect_swarm()["Version"]["Index"]
    current = engine.inspect_swarm()["Spec"]["Orchestration"].get("TaskHistoryRetentionLimit")
    wanted = (current or 5) + 1
    raft = _dry(requests.patch(f"{base}/swarm/orchestration?dryRun=true",
                               data=f'{{"TaskHistoryRetentionLimit":{wanted}}}'.encode(), headers=MERGE, timeout=10))
    assert raft["changes"] == [{"field": "Spec.Orchestration.TaskHistoryRetentionLimit", "old": current,
                                "new": wanted}]
    assert engine.inspect_swarm()["Version"]["Index"] == swarm_version


def test_writes_without_a_dry_run_refuse_it(base: str, engine: docker.APIClient) -> None:
    swarm = engine.inspect_swarm()
    for path, body in (("/swarm/rotate-token", {"target": "worker"}), ("/swarm/force-rotate-ca", None)):
        refused = requests.post(f"{base}{path}?dryRun=true", json=body, headers=JSON, timeout=10)
        assert refused.status_code == 400 and refused.json()["code"] == "API022", refused.text
    after = engine.inspect_swarm()
    assert after["JoinTokens"] == swarm["JoinTokens"] and after["Version"]["Index"] == swarm["Version"]["Index"]
    bad = requests.put(f"{base}/nodes/x/availability?dryRun=perhaps", json={"availability": "drain"},
                       headers=JSON, timeout=10)
    assert bad.status_code == 400 and bad.json()["code"] == "API012"
