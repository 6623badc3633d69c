"""Node writes on a three-node lab swarm of this module's own (``scripts/lab-swarm up --name objw --nodes 3``):
drain a worker and see its tasks rescheduled onto the other nodes in the app's cache; promote a worker to
manager and demote it back; refuse to remove a node that is up (NOD001), then remove one that is down.

The lab script stops only the manager's engine (``engine-stop``), not a worker's; a worker is made "down"
here by leaving the swarm (``docker swarm leave`` on its own engine), which is how a node is retired anyway.
That test runs last: the lab is torn down after the module.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.conftest import lab, running_app, wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration
LAB_NAME = "objw"
DRAIN_BOUND = 30.0   # lab notes: a drain reschedules in ~4.4 s


@pytest.fixture(scope="module")
def lab_host() -> Iterator[str]:
    host = lab("up", "--name", LAB_NAME, "--nodes", "3")
    assert host, "scripts/lab-swarm printed no DOCKER_HOST"
    yield host
    lab("down", "--name", LAB_NAME)


@pytest.fixture(scope="module")
def mengine(lab_host: str) -> Any:
    return docker.APIClient(base_url=lab_host, version="1.41", timeout=30)


@pytest.fixture(scope="module")
def app3(lab_host: str) -> Iterator[Any]:
    yield from running_app(lab_host, operations_level=3)


@pytest.fixture(scope="module")
def workers(mengine: Any) -> list[dict[str, Any]]:
    found = sorted((n for n in mengine.nodes() if n["Spec"]["Role"] == "worker"),
                   key=lambda n: n["Description"]["Hostname"])
    assert len(found) == 2, [n["Description"]["Hostname"] for n in mengine.nodes()]
    return found


def node_in_step(client: Any, engine: Any, node_id: str) -> None:
    """Write with the version the engine has now (node versions move as managers report, tasks attach...)."""
    wait_for(lambda: client.get(f"/nodes/{node_id}").get_json()["node"]["Version"]["Index"]
             == engine.inspect_node(node_id)["Version"]["Index"], 20, message="node version cached")


def running_on(client: Any, service_id: str) -> dict[str, int]:
    """Running tasks of the service per node id, from the app's cache."""
    counts: dict[str, int] = {}
    for task in client.get(f"/services/{service_id}/tasks").get_json()["items"]:
        if task["Status"]["State"] == "running" and task["DesiredState"] == "running":
            counts[task["NodeID"]] = counts.get(task["NodeID"], 0) + 1
    return counts


def test_drain_a_worker_reschedules_its_tasks(app3: Any, mengine: Any, lab_host: str,
                                              workers: list[dict[str, Any]]) -> None:
    client = app3.test_client()
    dclient = docker.DockerClient(base_url=lab_host, version="1.41", timeout=30)
    service = sleeper(dclient, f"t-objw-spread-{uuid.uuid4().hex[:6]}", replicas=6)
    try:
        spread = wait_for(lambda: (c := running_on(client, service.id)) and sum(c.values()) == 6 and len(c) >= 2
                          and c, 60, interval=0.25, message="6 tasks running over 2+ nodes")
        assert isinstance(spread, dict)
        target = next(w for w in workers if spread.get(w["ID"]))
        node_id = target["ID"]
        node_in_step(client, mengine, node_id)
        started = time.monotonic()
        response = client.put(f"/nodes/{node_id}/availability", json={"availability": "drain"})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["node"]["Spec"]["Availability"] == "drain"
        assert mengine.inspect_node(node_id)["Spec"]["Availability"] == "drain"

        def moved() -> bool:
            counts = running_on(client, service.id)
            on_node = [t for t in client.get(f"/nodes/{node_id}/tasks").get_json()["items"]
                       if t["ServiceID"] == service.id and t["Status"]["State"] == "running"]
            return not counts.get(node_id) and sum(counts.values()) == 6 and not on_node

        wait_for(moved, DRAIN_BOUND, interval=0.1, message="tasks rescheduled off the drained node")
        elapsed = time.monotonic() - started
        print(f"drain: tasks of {spread.get(node_id)} slot(s) rescheduled in {elapsed:.1f} s")
        engine_view = [t for t in mengine.tasks(filters={"service": service.id, "desired-state": "running"})
                       if t["Status"]["State"] == "running"]
        assert len(engine_view) == 6 and all(t["NodeID"] != node_id for t in engine_view)

        node_in_step(client, mengine, node_id)
        response = client.put(f"/nodes/{node_id}/availability", json={"availability": "active"})
        assert response.status_code == 200, response.get_json()
        assert mengine.inspect_node(node_id)["Spec"]["Availability"] == "active"
        assert client.get(f"/nodes/{node_id}").get_json()["node"]["Spec"]["Availability"] == "active"
    finally:
        service.remove()
        for worker in workers:
            spec = mengine.inspect_node(worker["ID"])
            if spec["Spec"]["Availability"] != "active":
                mengine.update_node(worker["ID"], spec["Version"]["Index"], {**spec["Spec"], "Availability": "active"})


def test_promote_a_worker_and_demote_it_back(app3: Any, mengine: Any, workers: list[dict[str, Any]]) -> None:
    client = app3.test_client()
    node_id = workers[0]["ID"]
    assert client.get(f"/nodes/{node_id}/role").get_json() == {
        **client.get(f"/nodes/{node_id}/role").get_json(), "role": "worker", "isLeader": False, "managerCount": 1}
    try:
        node_in_step(client, mengine, node_id)
        response = client.put(f"/nodes/{node_id}/role", json={"role": "manager"})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["node"]["Spec"]["Role"] == "manager"
        assert mengine.inspect_node(node_id)["Spec"]["Role"] == "manager"
        role = client.get(f"/nodes/{node_id}/role").get_json()
        assert role["role"] == "manager" and role["managerCount"] == 2 and role["isLeader"] is False
        wait_for(lambda: (mengine.inspect_node(node_id).get("ManagerStatus") or {}).get("Reachability")
                 == "reachable", 30, interval=0.25, message="the new manager reachable")

        node_in_step(client, mengine, node_id)
        response = client.put(f"/nodes/{node_id}/role", json={"role": "worker"})
        assert response.status_code == 200, response.get_json()
        assert mengine.inspect_node(node_id)["Spec"]["Role"] == "worker"
        role = client.get(f"/nodes/{node_id}/role").get_json()
        assert role["role"] == "worker" and role["managerCount"] == 1
        wait_for(lambda: not mengine.inspect_node(node_id).get("ManagerStatus"), 30, interval=0.25,
                 message="the demoted node out of the raft group")
    finally:
        spec = mengine.inspect_node(node_id)
        if spec["Spec"]["Role"] != "worker":
            mengine.update_node(node_id, spec["Version"]["Index"], {**spec["Spec"], "Role": "worker"})


def test_remove_a_node_refused_while_up_then_removed_when_down(app3: Any, mengine: Any, lab_host: str,
                                                               workers: list[dict[str, Any]]) -> None:
    client = app3.test_client()
    node = workers[1]
    node_id = node["ID"]
    response = client.delete(f"/nodes/{node_id}")
    assert response.status_code == 409 and response.get_json()["code"] == "NOD001"
    assert mengine.inspect_node(node_id)["Status"]["State"] == "ready"

    # the worker leaves the swarm from its own engine; the manager then sees it down
    index = node["Description"]["Hostname"].rsplit("-n", 1)[1]            # hostname objw-n<i>
    worker_host = lab_host.replace("/n1/docker.sock", f"/n{index}/docker.sock")   # the lab's layout
    assert worker_host != lab_host
    subprocess.run(["docker", "-H", worker_host, "swarm", "leave"], check=True, capture_output=True, timeout=60)
    wait_for(lambda: client.get(f"/nodes/{node_id}").get_json()["node"]["Status"]["State"] == "down", 60,
             interval=0.25, message="the node down in the cache")
    response = client.delete(f"/nodes/{node_id}")
    assert response.status_code == 204, response.get_json()
    with pytest.raises(docker.errors.NotFound):
        mengine.inspect_node(node_id)
    assert client.get(f"/nodes/{node_id}").status_code == 404
