"""Object writes through the API against the lab engine, each checked with the engine's own inspect:
configs and secrets (create, labels, removal, in use, name taken), networks, volumes, node labels, role and
availability reads/writes that are safe on the shared one-node lab, task removal (the scheduler replaces the
task), stack removal (a stack deployed here); every operation refused with 403 OPS001 one level below its
tier; Allow / Accept-Patch on the labels reads and /configs at each level.

Every object made here has a ``t-objw-`` name and is removed at teardown; demo objects are only read.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.conftest import start_runtime_app, wait_for
from tests.integration.engine_state import IMAGE, sleeper

pytestmark = pytest.mark.integration
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def unique(prefix: str = "t-objw") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture(scope="module")
def apps(docker_host: str) -> Iterator[dict[int, Any]]:
    """One in-process app per operations level (0..3), all following the lab."""
    made: dict[int, Any] = {}
    runtimes = []
    try:
        for level in (3, 2, 1, 0):
            app, runtime = start_runtime_app(docker_host, operations_level=level)
            made[level] = app
            runtimes.append(runtime)
        yield made
    finally:
        for runtime in runtimes:
            runtime.stop()


@pytest.fixture
def client(apps: dict[int, Any]) -> Any:
    return apps[3].test_client()


@pytest.fixture
def cleanup(engine: Any) -> Iterator[list[tuple[str, str]]]:
    """(kind, id) pairs removed at teardown, services first, whatever the test left."""
    made: list[tuple[str, str]] = []
    yield made
    order = {"service": 0, "network": 1, "config": 2, "secret": 2, "volume": 3}
    for kind, object_id in sorted(made, key=lambda item: order[item[0]]):
        remover = {"service": engine.remove_service, "network": engine.remove_network,
                   "config": engine.remove_config, "secret": engine.remove_secret,
                   "volume": lambda v: engine.remove_volume(v, force=True)}[kind]
        for _ in range(40):   # a removed service's tasks may still hold a network/config for a moment
            try:
                remover(object_id)
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError:
                time.sleep(0.25)   # retry pacing of this bounded loop: the tasks let go of the object


def cached(client: Any, path: str) -> None:
    wait_for(lambda: client.get(path).status_code == 200, 10, message=f"{path} cached")


def node_in_step(client: Any, engine: Any, node_id: str) -> None:
    """The cache holds the node's current version (the node changes when tasks of earlier tests attach
    to or leave overlay networks on it; a write based on an older version is a 409 NOD002, by design)."""
    wait_for(lambda: client.get(f"/nodes/{node_id}").get_json()["node"]["Version"]["Index"]
             == engine.inspect_node(node_id)["Version"]["Index"], 15, message="node version cached")


# ---------------------------------------------------------------------------------------------- configs
def test_config_create_labels_and_removal(client: Any, engine: Any,
                                          cleanup: list[tuple[str, str]]) -> None:
    name = unique()
    response = client.post("/configs", json={"name": name, "data": b64("a=1\n"), "labels": {"team": "ops"}})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    config_id = body["config"]["ID"]
    cleanup.append(("config", config_id))
    assert response.headers["Location"] == f"/configs/{config_id}"
    assert body["@type"] == "Config" and body["services"] == []
    inspected = engine.inspect_config(config_id)
    assert inspected["Spec"]["Name"] == name and inspected["Spec"]["Labels"] == {"team": "ops"}
    assert base64.b64decode(inspected["Spec"]["Data"]) == b"a=1\n"
    assert client.get(f"/configs/{config_id}").status_code == 200   # read-your-writes

    # name taken, bad bodies: nothing created
    assert client.post("/configs", json={"name": name, "data": b64("x")}).get_json()["code"] == "CFG003"
    for bad in ({"name": unique(), "data": "***"}, {"name": "", "data": b64("x")}, {"data": b64("x")}):
        response = client.post("/configs", json=bad)
        assert response.status_code == 400 and response.get_json()["code"] == "CFG004", bad

    # labels: read, PUT (wrapped), JSON Patch, merge patch, wrong patch type
    labels_path = f"/configs/{config_id}/labels"
    response = client.get(labels_path)
    assert response.get_json()["labels"] == {"team": "ops"} and response.get_json()["@type"] == "ConfigLabels"
    response = client.put(labels_path, json={"labels": {"team": "dev", "tier": "web"}})
    assert response.status_code == 200 and response.get_json()["labels"] == {"team": "dev", "tier": "web"}
    assert engine.inspect_config(config_id)["Spec"]["Labels"] == {"team": "dev", "tier": "web"}
    response = client.patch(labels_path, data='[{"op":"remove","path":"/tier"},{"op":"add","path":"/x","value":"1"}]',
                            content_type=JSON_PATCH)
    assert response.status_code == 200 and response.get_json()["labels"] == {"team": "dev", "x": "1"}
    response = client.patch(labels_path, json={"x": None, "y": "2"}, headers={"Content-Type": MERGE_PATCH})
    assert response.get_json()["labels"] == {"team": "dev", "y": "2"}
    assert engine.inspect_config(config_id)["Spec"]["Labels"] == {"team": "dev", "y": "2"}
    response = client.patch(labels_path, json={"z": "3"})
    assert response.status_code == 415 and response.get_json()["code"] == "API004"
    assert response.headers["Accept-Patch"] == f"{JSON_PATCH}, {MERGE_PATCH}"
    response = client.patch(labels_path, data='[{"op":"test","path":"/team","value":"nope"}]', content_type=JSON_PATCH)
    assert response.status_code == 409 and response.get_json()["code"] == "API010"
    assert engine.inspect_config(config_id)["Spec"]["Labels"] == {"team": "dev", "y": "2"}
    assert client.get(labels_path).get_json()["labels"] == {"team": "dev", "y": "2"}

    response = client.delete(f"/configs/{config_id}")
    assert response.status_code == 204
    with pytest.raises(docker.errors.NotFound):
        engine.inspect_config(config_id)
    assert client.get(f"/configs/{config_id}").status_code == 404
    assert client.delete(f"/configs/{config_id}").get_json()["code"] == "CFG002"


def test_create_with_return_minimal_is_201_with_location_only(client: Any, engine: Any,
                                                              cleanup: list[tuple[str, str]]) -> None:
    response = client.post("/configs", json={"name": unique(), "data": b64("x")}, headers={"Prefer": "return=minimal"})
    assert response.status_code == 201 and response.data == b""
    assert response.headers["Preference-Applied"] == "return=minimal"
    config_id = response.headers["Location"].rsplit("/", 1)[1]
    cleanup.append(("config", config_id))
    assert engine.inspect_config(config_id)


def test_configs_and_secrets_in_use_are_409(client: Any, engine: Any, dclient: docker.DockerClient,
                                            cleanup: list[tuple[str, str]]) -> None:
    config_name, secret_name = unique(), unique()
    config_id = client.post("/configs", json={"name": config_name, "data": b64("c")}).get_json()["config"]["ID"]
    cleanup.append(("config", config_id))
    secret_id = client.post("/secrets", json={"name": secret_name, "data": b64("s")}).get_json()["secret"]["ID"]
    cleanup.append(("secret", secret_id))
    service = sleeper(dclient, unique(), configs=[docker.types.ConfigReference(config_id, config_name)],
                      secrets=[docker.types.SecretReference(secret_id, secret_name)])
    cleanup.append(("service", service.id))
    cached(client, f"/services/{service.id}")
    wait_for(lambda: client.get(f"/configs/{config_id}").get_json()["services"], 10, message="config users cached")
    response = client.delete(f"/configs/{config_id}")
    assert response.status_code == 409 and response.get_json()["code"] == "CFG001"
    wait_for(lambda: client.get(f"/secrets/{secret_id}").get_json()["services"], 10, message="secret users cached")
    response = client.delete(f"/secrets/{secret_id}")
    assert response.status_code == 409 and response.get_json()["code"] == "SEC001"
    assert engine.inspect_config(config_id) and engine.inspect_secret(secret_id)


# ---------------------------------------------------------------------------------------------- secrets
def test_secret_create_labels_and_removal(client: Any, engine: Any,
                                          cleanup: list[tuple[str, str]]) -> None:
    name = unique()
    response = client.post("/secrets", json={"name": name, "data": b64("hunter2")})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    secret_id = body["secret"]["ID"]
    cleanup.append(("secret", secret_id))
    assert "Data" not in body["secret"]["Spec"] and body["services"] == []
    assert response.headers["Location"] == f"/secrets/{secret_id}"
    assert engine.inspect_secret(secret_id)["Spec"]["Name"] == name
    assert client.post("/secrets", json={"name": name, "data": b64("x")}).get_json()["code"] == "SEC003"
    assert client.post("/secrets", json={"name": unique(), "data": "%%"}).get_json()["code"] == "SEC004"

    response = client.put(f"/secrets/{secret_id}/labels", json={"rotated": "no"})   # bare map
    assert response.status_code == 200 and response.get_json()["@type"] == "SecretLabels"
    assert engine.inspect_secret(secret_id)["Spec"]["Labels"] == {"rotated": "no"}
    response = client.patch(f"/secrets/{secret_id}/labels", data='{"rotated":"yes"}', content_type=MERGE_PATCH)
    assert response.get_json()["labels"] == {"rotated": "yes"}
    assert engine.inspect_secret(secret_id)["Spec"]["Labels"] == {"rotated": "yes"}
    assert client.patch(f"/secrets/{secret_id}/labels", json={}, headers={"Content-Type": "text/plain"}
                        ).status_code == 415
    assert client.get(f"/secrets/{secret_id}/labels").get_json()["labels"] == {"rotated": "yes"}

    assert client.delete(f"/secrets/{secret_id}").status_code == 204
    with pytest.raises(docker.errors.NotFound):
        engine.inspect_secret(secret_id)


# ---------------------------------------------------------------------------------------------- networks
def test_network_create_in_use_and_removal(client: Any, engine: Any, dclient: docker.DockerClient,
                                           cleanup: list[tuple[str, str]]) -> None:
    name = unique()
    response = client.post("/networks", json={"name": name, "attachable": True, "labels": {"a": "b"}})
    assert response.status_code == 201, response.get_json()
    network_id = response.get_json()["network"]["Id"]
    cleanup.append(("network", network_id))
    assert response.headers["Location"] == f"/networks/{network_id}"
    inspected = engine.inspect_network(network_id)
    assert inspected["Name"] == name and inspected["Driver"] == "overlay" and inspected["Attachable"] is True
    assert inspected["Labels"] == {"a": "b"} and inspected["Scope"] == "swarm"
    assert client.post("/networks", json={"name": name}).get_json()["code"] == "NET003"
    for bad in ({"name": "a b"}, {"name": name + "x", "driver": ""}, {"name": name + "x", "attachable": "yes"}):
        assert client.post("/networks", json=bad).get_json()["code"] == "NET004", bad

    service = sleeper(dclient, unique(), networks=[network_id])
    cleanup.append(("service", service.id))
    wait_for(lambda: client.get(f"/networks/{network_id}").get_json()["services"], 10, message="network users cached")
    response = client.delete(f"/networks/{network_id}")
    assert response.status_code == 409 and response.get_json()["code"] == "NET001"
    assert engine.inspect_network(network_id)
    service.remove()

    def removed() -> bool:
        response = client.delete(f"/networks/{network_id}")
        assert response.status_code in (204, 409), response.get_json()
        return bool(response.status_code == 204)

    wait_for(removed, 30, interval=0.5, message="network removable once the service is gone")

    def gone() -> bool:   # removed from the swarm; the manager's node-local copy may linger a moment under load
        try:
            engine.inspect_network(network_id)
        except docker.errors.NotFound:
            return True
        return False

    wait_for(gone, 10, interval=0.2, message="the network gone from the engine after 204")
    assert client.delete("/networks/nope").get_json()["code"] == "NET002"


# ---------------------------------------------------------------------------------------------- volumes
def test_volume_create_and_removal(client: Any, engine: Any, cleanup: list[tuple[str, str]]) -> None:
    name = unique()
    response = client.post("/volumes", json={"name": name, "labels": {"k": "v"}})
    assert response.status_code == 201, response.get_json()
    cleanup.append(("volume", name))
    assert response.headers["Location"] == f"/volumes/{name}"
    assert response.get_json()["volume"]["Name"] == name
    inspected = engine.inspect_volume(name)
    assert inspected["Driver"] == "local" and inspected["Labels"] == {"k": "v"}
    again = client.post("/volumes", json={"name": name})
    assert again.status_code == 200 and again.get_json()["volume"]["Name"] == name   # the engine's idempotence
    for bad in ({"name": "x"}, {"name": "/abs"}, {"name": name, "driverOpts": {"a": 1}}, {"name": name, "x": 1}):
        assert client.post("/volumes", json=bad).get_json()["code"] == "VOL003", bad
    assert client.delete(f"/volumes/{name}?force=true").status_code == 204
    with pytest.raises(docker.errors.NotFound):
        engine.inspect_volume(name)
    assert client.delete(f"/volumes/{name}").get_json()["code"] == "VOL002"


# ---------------------------------------------------------------------------------------------- nodes (one-node safe)
def test_node_labels_put_patch_and_read(client: Any, engine: Any) -> None:
    node = engine.nodes()[0]
    node_id, original = node["ID"], dict(node["Spec"].get("Labels") or {})
    key = unique("t-objw-label")
    path = f"/nodes/{node_id}/labels"
    node_in_step(client, engine, node_id)
    try:
        response = client.put(path, json={**original, key: "1"})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["@type"] == "NodeLabels" and response.get_json()["labels"][key] == "1"
        assert engine.inspect_node(node_id)["Spec"]["Labels"][key] == "1"
        response = client.patch(path, data=f'[{{"op":"replace","path":"/{key}","value":"2"}}]', content_type=JSON_PATCH)
        assert response.status_code == 200 and response.get_json()["labels"][key] == "2"
        assert engine.inspect_node(node_id)["Spec"]["Labels"][key] == "2"
        response = client.patch(path, json={key: None}, headers={"Content-Type": MERGE_PATCH})
        assert key not in response.get_json()["labels"]
        assert key not in (engine.inspect_node(node_id)["Spec"].get("Labels") or {})
        assert client.patch(path, json={key: "x"}).status_code == 415
        response = client.put(path, json={key: 1})
        assert response.status_code == 400 and response.get_json()["code"] == "API006"
        assert client.get(path).get_json()["labels"] == original
    finally:
        spec = engine.inspect_node(node_id)
        if (spec["Spec"].get("Labels") or {}) != original:
            engine.update_node(node_id, spec["Version"]["Index"], {**spec["Spec"], "Labels": original})


def test_node_role_read_availability_noop_and_refusals(client: Any, engine: Any) -> None:
    node = engine.nodes()[0]
    node_id = node["ID"]
    node_in_step(client, engine, node_id)
    body = client.get(f"/nodes/{node_id}/role").get_json()
    assert body["@type"] == "NodeRole" and body["@id"] == f"/nodes/{node_id}/role"
    assert body["role"] == "manager" and body["isLeader"] is True and body["managerCount"] == 1
    response = client.put(f"/nodes/{node_id}/availability", json={"availability": "active"})
    assert response.status_code == 200 and response.get_json()["@type"] == "Node"
    assert engine.inspect_node(node_id)["Spec"]["Availability"] == "active"
    version = engine.inspect_node(node_id)["Version"]["Index"]
    assert client.put(f"/nodes/{node_id}/availability", json={"availability": "off"}).get_json()["code"] == "NOD004"
    assert client.put(f"/nodes/{node_id}/role", json={"role": "boss"}).get_json()["code"] == "NOD005"
    response = client.delete(f"/nodes/{node_id}")
    assert response.status_code == 409 and response.get_json()["code"] == "NOD001"
    assert client.put("/nodes/nope/role", json={"role": "worker"}).get_json()["code"] == "NOD003"
    assert client.get("/nodes/nope/role").status_code == 404
    assert engine.inspect_node(node_id)["Version"]["Index"] == version


# ---------------------------------------------------------------------------------------------- tasks
def test_remove_task_is_replaced_by_the_scheduler(client: Any, engine: Any,
                                                  dclient: docker.DockerClient,
                                                  cleanup: list[tuple[str, str]]) -> None:
    service = sleeper(dclient, unique())
    cleanup.append(("service", service.id))

    def running() -> list[dict[str, Any]]:
        return [t for t in engine.tasks(filters={"service": service.id})
                if t["Status"]["State"] == "running" and t["DesiredState"] == "running"]

    first = wait_for(running, 30, message="a running task")[0]  # type: ignore[index]
    cached(client, f"/tasks/{first['ID']}")
    response = client.delete(f"/tasks/{first['ID']}")
    assert response.status_code == 204, response.get_json()
    replacement = wait_for(lambda: [t for t in running() if t["ID"] != first["ID"]], 30,
                           message="a replacement task")[0]  # type: ignore[index]
    assert replacement["Slot"] == first["Slot"]
    assert engine.inspect_task(first["ID"])["Status"]["State"] != "running"
    wait_for(lambda: client.get(f"/tasks/{first['ID']}").get_json()["task"]["Status"]["State"] != "running", 10,
             message="the old task's end cached")
    response = client.delete(f"/tasks/{first['ID']}")
    assert response.status_code == 409 and response.get_json()["code"] == "TSK001"
    assert client.delete("/tasks/nope").get_json()["code"] == "TSK002"


# ---------------------------------------------------------------------------------------------- stacks
COMPOSE = """version: "3.8"
services:
  app:
    image: {image}
    command: ["sleep", "1000000"]
    init: true
    stop_grace_period: 1s
    networks: [net]
    configs: [{{source: conf, target: /conf}}]
    secrets: [tok]
    deploy:
      endpoint_mode: dnsrr
networks:
  net:
    driver: overlay
configs:
  conf:
    file: ./conf.txt
secrets:
  tok:
    file: ./tok.txt
volumes:
  data: {{}}
"""


def test_remove_a_stack_deployed_here(client: Any, engine: Any, docker_host: str,
                                      tmp_path: Path) -> None:
    name = unique("tobjw").replace("-", "")
    (tmp_path / "stack.yml").write_text(COMPOSE.format(image=IMAGE))
    (tmp_path / "conf.txt").write_text("c=1\n")
    (tmp_path / "tok.txt").write_text("t\n")
    env = {**os.environ, "DOCKER_HOST": docker_host}
    subprocess.run(["docker", "stack", "deploy", "--resolve-image", "never", "-c", "stack.yml", name],
                   cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    label = {"label": f"com.docker.stack.namespace={name}"}
    try:
        wait_for(lambda: client.get(f"/stacks/{name}").status_code == 200
                 and len(client.get(f"/stacks/{name}").get_json()["stack"]["networks"]) == 1, 20,
                 message="stack cached")
        response = client.delete(f"/stacks/{name}")
        assert response.status_code == 200, response.get_json()
        body = response.get_json()
        assert body["removed"] == {"services": 1, "networks": 1, "configs": 1, "secrets": 1}, body
        assert "errors" not in body
        assert engine.services(filters=label) == []
        assert engine.configs(filters=label) == [] and engine.secrets(filters=label) == []
        # the network is removed from the swarm; the manager's node-local copy may linger a moment under load
        wait_for(lambda: engine.networks(filters=label) == [], 10, interval=0.2, message="stack network gone")
        assert client.get(f"/stacks/{name}").status_code == 404
        assert client.delete(f"/stacks/{name}").get_json()["code"] == "STK001"
    finally:
        subprocess.run(["docker", "stack", "rm", name], env=env, capture_output=True, timeout=60)


# ---------------------------------------------------------------------------------------------- levels
OPERATIONS: list[tuple[str, str, int, dict[str, Any]]] = [
    # (method, path template, tier, request kwargs); {node} {config} {secret} {task} {network} are real ids
    ("PUT", "/nodes/{node}/availability", 3, {"json": {"availability": "active"}}),
    ("PUT", "/nodes/{node}/role", 3, {"json": {"role": "manager"}}),
    ("DELETE", "/nodes/{node}", 3, {}),
    ("PUT", "/nodes/{node}/labels", 2, {"json": {}}),
    ("PATCH", "/nodes/{node}/labels", 2, {"json": {}, "headers": {"Content-Type": MERGE_PATCH}}),
    ("DELETE", "/tasks/{task}", 1, {}),
    ("DELETE", "/stacks/demo", 3, {}),
    ("POST", "/configs", 2, {"json": {"name": "t-objw-never", "data": "eA=="}}),
    ("PUT", "/configs/{config}/labels", 2, {"json": {}}),
    ("PATCH", "/configs/{config}/labels", 2, {"json": {}, "headers": {"Content-Type": MERGE_PATCH}}),
    ("DELETE", "/configs/{config}", 3, {}),
    ("POST", "/secrets", 2, {"json": {"name": "t-objw-never", "data": "eA=="}}),
    ("PUT", "/secrets/{secret}/labels", 2, {"json": {}}),
    ("PATCH", "/secrets/{secret}/labels", 2, {"json": {}, "headers": {"Content-Type": MERGE_PATCH}}),
    ("DELETE", "/secrets/{secret}", 3, {}),
    ("POST", "/networks", 2, {"json": {"name": "t-objw-never"}}),
    ("DELETE", "/networks/{network}", 3, {}),
    ("POST", "/volumes", 2, {"json": {"name": "t-objw-never"}}),
    ("DELETE", "/volumes/{volume}", 3, {}),
]


def demo_ids(engine: Any) -> dict[str, str]:
    """Ids of demo objects; a refused write never touches them."""
    task = next(t for t in engine.tasks(filters={"desired-state": "running"}))
    return {"node": engine.nodes()[0]["ID"], "task": task["ID"],
            "config": engine.configs()[0]["ID"], "secret": engine.secrets()[0]["ID"],
            "network": next(n["Id"] for n in engine.networks() if n.get("Scope") == "swarm"),
            "volume": (engine.volumes()["Volumes"] or [{"Name": "none"}])[0]["Name"]}


@pytest.mark.parametrize("method,template,tier,kwargs", OPERATIONS, ids=[f"{m} {p}" for m, p, _, _ in OPERATIONS])
def test_each_operation_is_refused_below_its_tier(apps: dict[int, Any], engine: Any, method: str,
                                                  template: str, tier: int, kwargs: dict[str, Any]) -> None:
    path = template.format(**demo_ids(engine))
    response = apps[tier - 1].test_client().open(path, method=method, **kwargs)
    assert response.status_code == 403, (path, response.get_json())
    body = response.get_json()
    assert body["code"] == "OPS001" and body["requiredLevel"] == tier and body["configuredLevel"] == tier - 1
    assert engine.inspect_node(demo_ids(engine)["node"])   # still there, unchanged by a refused write


def test_allow_and_accept_patch_at_each_level(apps: dict[int, Any], engine: Any) -> None:
    ids = demo_ids(engine)
    labels_paths = [f"/nodes/{ids['node']}/labels", f"/configs/{ids['config']}/labels",
                    f"/secrets/{ids['secret']}/labels"]
    for level, app in apps.items():
        client = app.test_client()
        for path in labels_paths:
            response = client.get(path)
            assert response.status_code == 200, path
            if level >= 2:
                assert response.headers["Allow"] == "GET, HEAD, PUT, PATCH", (level, path)
                assert response.headers["Accept-Patch"] == f"{JSON_PATCH}, {MERGE_PATCH}"
            else:
                assert response.headers["Allow"] == "GET, HEAD", (level, path)
                assert "Accept-Patch" not in response.headers
        allow = client.get("/configs").headers["Allow"]
        assert allow == ("GET, HEAD, POST" if level >= 2 else "GET, HEAD"), (level, allow)
        assert client.get("/secrets").headers["Allow"] == allow
        role = client.get(f"/nodes/{ids['node']}/role").headers["Allow"]
        assert role == ("GET, HEAD, PUT" if level >= 3 else "GET, HEAD"), (level, role)
        node = client.get(f"/nodes/{ids['node']}").headers["Allow"]   # the detail: its family's writes
        assert node == {1: "GET, HEAD", 2: "GET, HEAD, PUT, PATCH", 3: "GET, HEAD, PUT, PATCH, DELETE"}.get(
            level, "GET, HEAD"), (level, node)
        task = client.get(f"/tasks/{ids['task']}").headers["Allow"]
        assert task == ("GET, HEAD, DELETE" if level >= 1 else "GET, HEAD"), (level, task)
