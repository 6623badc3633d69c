"""/cluster, /cluster/capacity, /stacks/summary and /disk-usage against the lab swarm: counts equal what
``docker node ls``, ``docker service ls`` and ``docker system df`` print, the demo stack's declared
replicas, limits and reservations add up, and localNodeID is the engine's own node. Every response is
checked against /api by the integration conftest."""

from __future__ import annotations

from typing import Any

import docker
import pytest
import requests
from flask.testing import FlaskClient

from tests.conftest import docker_lines, wait_for

pytestmark = pytest.mark.integration
MIB = 1024 ** 2
DF_TYPES = {"Images": "images", "Containers": "containers", "Local Volumes": "volumes", "Build Cache": "buildCache"}


@pytest.fixture
def client(live_client: FlaskClient) -> FlaskClient:
    return live_client


cli = docker_lines


def get(client: FlaskClient, path: str) -> dict[str, Any]:
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def test_cluster_counts_match_the_cli(client: FlaskClient, docker_host: str) -> None:
    def agree() -> bool:
        nodes = cli(docker_host, "node", "ls", "--format", "{{.ID}} {{.Status}} {{.Availability}}")
        services = cli(docker_host, "service", "ls", "-q")
        body = get(client, "/cluster")
        return bool(body["nodeCount"] == len(nodes) and body["serviceCount"] == len(services)
                and body["nodesReady"] == sum(" Ready " in f" {line} " for line in nodes)
                and body["nodesDraining"] == sum(line.endswith(" Drain") for line in nodes))
    wait_for(agree, 20, interval=0.5, message="/cluster counts equal to docker node ls / service ls")
    body = get(client, "/cluster")
    assert body["@type"] == "Cluster" and body["stackCount"] >= 2
    assert sum(body["tasksByState"].values()) == body["taskCount"] and body["tasksByState"].get("running", 0) > 0
    assert body["servicesConverged"] + body["servicesDegraded"] == body["serviceCount"]
    assert body["servicesDegraded"] >= 1   # demo_pending never gets its replica
    assert body["reservedCPU"] >= 50_000_000 and body["reservedMemory"] >= 8 * MIB   # demo_web's reservation


def test_local_node_id_is_the_engines_own(client: FlaskClient, engine: docker.APIClient) -> None:
    own = engine.info()["Swarm"]["NodeID"]
    wait_for(lambda: get(client, "/cluster").get("localNodeID") == own, 10, interval=0.2,
             message="localNodeID")


def test_capacity_matches_node_resources(client: FlaskClient, engine: docker.APIClient) -> None:
    nodes = engine.nodes()
    body = get(client, "/cluster/capacity")
    assert body["nodeCount"] == len(nodes)
    assert body["totalCPU"] == sum(n["Description"]["Resources"]["NanoCPUs"] for n in nodes) // 1_000_000_000
    assert body["totalMemory"] == sum(n["Description"]["Resources"]["MemoryBytes"] for n in nodes)
    assert sorted(row["hostname"] for row in body["nodes"]) == sorted(n["Description"]["Hostname"] for n in nodes)
    assert body["reserved"]["memory"] >= 8 * MIB and body["reserved"]["cpu"] >= 0.05   # demo_web runs
    for row in body["nodes"]:
        assert row["cpu"]["available"] == pytest.approx(max(0.0, row["cpu"]["total"] - row["cpu"]["reserved"]),
                                                        abs=0.002)


def test_stack_summary_of_the_demo_stack(client: FlaskClient, docker_host: str) -> None:
    rows = {row["name"]: row for row in get(client, "/stacks/summary")["items"]}
    assert {"demo", "ops"} <= set(rows)
    demo = rows["demo"]
    services = cli(docker_host, "stack", "services", "-q", "demo")
    assert demo["serviceCount"] == len(services) == 5
    assert (demo["configCount"], demo["secretCount"], demo["networkCount"], demo["volumeCount"]) == (1, 1, 2, 1)
    assert demo["desiredTasks"] == 6                                # web 1, api 2, ticker, crasher, pending
    assert demo["cpuLimitCores"] == pytest.approx(0.25)             # web only
    assert demo["memoryLimitBytes"] == 32 * MIB + 2 * 16 * MIB + 16 * MIB
    assert demo["tasksByState"].get("running", 0) >= 4
    assert demo["memoryUsageBytes"] is None and demo["cpuUsagePercent"] is None


def test_disk_usage_matches_docker_system_df(client: FlaskClient, docker_host: str) -> None:
    def agree() -> bool:
        lines = cli(docker_host, "system", "df", "--format", "{{.Type}}|{{.TotalCount}}|{{.Active}}")
        expected = {DF_TYPES[t]: (int(c), int(a)) for t, c, a in (line.split("|") for line in lines)}
        items = get(client, "/disk-usage")["items"]
        return bool({item["type"]: (item["count"], item["active"]) for item in items} == expected)
    wait_for(agree, 30, interval=1.0, message="/disk-usage counts equal to docker system df")
    body = get(client, "/disk-usage")
    assert [item["type"] for item in body["items"]] == ["images", "containers", "volumes", "buildCache"]
    images = body["items"][0]
    assert images["totalSize"] > 0 and 0 <= images["reclaimable"] <= images["totalSize"]


def test_through_gunicorn(server: str, engine: docker.APIClient) -> None:
    """The real server: JSON-LD overview with its ETag and 304, and the summary route winning over the
    stack detail route."""
    response = requests.get(f"{server}/cluster", timeout=10)
    assert response.status_code == 200 and response.json()["@type"] == "Cluster"
    assert requests.get(f"{server}/cluster", headers={"If-None-Match": response.headers["ETag"]},
                        timeout=10).status_code in (200, 304)   # 200 when the cluster moved meanwhile
    summary = requests.get(f"{server}/stacks/summary", timeout=10)
    assert summary.status_code == 200 and summary.json()["@type"] == "Collection"
    assert requests.get(f"{server}/disk-usage", timeout=30).status_code == 200
    atom = requests.get(f"{server}/cluster", headers={"Accept": "application/atom+xml"}, timeout=10)
    assert atom.status_code == 406 and atom.json()["type"].endswith("API003")
    own = engine.info()["Swarm"]["NodeID"]
    wait_for(lambda: requests.get(f"{server}/cluster", timeout=10).json().get("localNodeID") == own, 10,
             interval=0.2, message="localNodeID through gunicorn")
