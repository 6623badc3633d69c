"""/search and /recommendations against the lab swarm (docs/search-and-recommendations.md): the demo stack's
objects are found by name, image, label and id prefix; the crasher's restart loop and the pending service's
replicas appear as findings; a service created with one replica and no limits gets its findings, which go (the
limit one) when it is updated with limits, within a bounded wait, while the others keep their firstSeen. Every
response is checked against /api by the integration conftest."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from flask.testing import FlaskClient

from tests.conftest import wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration
FINDING_WITHIN = 15.0   # debounce 0.5 s + the watcher's task polling + a loaded machine


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture
def client(live_app: Any) -> FlaskClient:
    app, _ = live_app
    return app.test_client()


def service_id(dclient: docker.DockerClient, name: str) -> str:
    found = dclient.services.list(filters={"name": name})
    exact = [service for service in found if service.name == name]
    assert exact, f"the lab has no service {name}; is the demo stack deployed?"
    return str(exact[0].id)


def search(client: FlaskClient, q: str, limit: int = 10) -> dict[str, Any]:
    response = client.get("/search", query_string={"q": q, "limit": str(limit)})
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def findings(client: FlaskClient, **filters: str) -> dict[str, dict[str, Any]]:
    response = client.get("/recommendations", query_string={"limit": "1000", **filters})
    assert response.status_code == 200, response.get_data(as_text=True)
    return {item["id"]: item for item in response.get_json()["items"]}


# --------------------------------------------------------------------------- search
def test_search_finds_a_demo_service_by_name_image_label_and_id_prefix(client: FlaskClient,
                                                                     dclient: docker.DockerClient) -> None:
    web = service_id(dclient, "demo_web")
    by_name = search(client, "demo_web")
    assert by_name["results"]["services"][0]["id"] == web
    assert by_name["results"]["services"][0]["match"] == "exact"
    assert by_name["counts"]["tasks"] >= 1                       # its tasks through the service name
    by_image = search(client, "local/busybox", limit=1000)
    assert web in {hit["id"] for hit in by_image["results"]["services"]}
    assert by_image["counts"]["services"] >= 8                   # every lab service runs that image
    by_label = search(client, "shoal.lab.tier=frontend")
    assert [hit["id"] for hit in by_label["results"]["services"]] == [web]
    by_id = search(client, web[:10])
    assert by_id["results"]["services"][0] == {**by_id["results"]["services"][0], "id": web, "match": "prefix"}
    stack = search(client, "demo")["results"]["stacks"][0]
    assert (stack["id"], stack["match"]) == ("demo", "exact")


def test_search_finds_configs_networks_and_volumes_of_the_lab(client: FlaskClient) -> None:
    found = search(client, "demo", limit=100)
    assert {"demo_app_cfg"} <= {hit["name"] for hit in found["results"]["configs"]}
    assert {"demo_backend", "demo_frontend"} <= {hit["name"] for hit in found["results"]["networks"]}
    assert "demo_data" in {hit["name"] for hit in found["results"]["volumes"]}


def test_a_bad_query_is_a_problem(client: FlaskClient) -> None:
    response = client.get("/search?q=%20")
    assert response.status_code == 400 and response.get_json()["code"] == "SEA001"


# --------------------------------------------------------------------------- recommendations
def test_the_crasher_and_the_pending_service_have_findings(client: FlaskClient,
                                                           dclient: docker.DockerClient) -> None:
    crasher, pending = service_id(dclient, "demo_crasher"), service_id(dclient, "demo_pending")

    def present() -> dict[str, dict[str, Any]] | None:
        current = findings(client)
        wanted = {f"restart-loop:service:{crasher}", f"replicas-not-running:service:{pending}",
                  f"constraint-label-missing:service:{pending}"}
        return current if wanted <= set(current) else None

    current = wait_for(present, FINDING_WITHIN, interval=0.5, message="crasher and pending findings")
    assert isinstance(current, dict)
    loop = current[f"restart-loop:service:{crasher}"]
    assert loop["severity"] == "critical" and "non-zero exit (3)" in loop["message"]
    assert current[f"replicas-not-running:service:{pending}"]["severity"] == "critical"
    assert "node.labels.lab.nonexistent" in current[f"constraint-label-missing:service:{pending}"]["message"]
    only_critical = findings(client, severity="critical", resource="demo_pending")
    assert only_critical and all(f["severity"] == "critical" and f["resourceName"] == "demo_pending"
                                 for f in only_critical.values())


def test_the_single_manager_lab_has_cluster_findings(client: FlaskClient) -> None:
    assert "manager-quorum:cluster:swarm" in findings(client, kind="cluster")
    assert any(f["check"] == "unused-config" and f["resourceName"] == "spare-cfg"
               for f in findings(client, kind="config").values())


@pytest.fixture
def bare_service(dclient: docker.DockerClient) -> Iterator[Any]:
    service = sleeper(dclient, f"shoal-it-rec-{uuid.uuid4().hex[:8]}", replicas=1)
    try:
        yield service
    finally:
        service.remove()


def test_a_finding_goes_when_the_service_is_fixed_and_the_others_keep_first_seen(
        client: FlaskClient, bare_service: Any) -> None:
    no_limits, single = f"no-limits:service:{bare_service.id}", f"single-replica:service:{bare_service.id}"

    def appeared() -> dict[str, dict[str, Any]] | None:
        current = findings(client, resource=bare_service.id)
        return current if {no_limits, single} <= set(current) else None

    before = wait_for(appeared, FINDING_WITHIN, interval=0.2, message="findings of the new service")
    assert isinstance(before, dict)
    assert before[no_limits]["resource"] == "cpu+memory"
    bare_service.reload()
    bare_service.update(resources=docker.types.Resources(cpu_limit=100_000_000, mem_limit=32 << 20,
                                                         cpu_reservation=10_000_000, mem_reservation=8 << 20))

    def fixed() -> dict[str, dict[str, Any]] | None:
        current = findings(client, resource=bare_service.id)
        return current if no_limits not in current else None

    after = wait_for(fixed, FINDING_WITHIN, interval=0.2, message="the no-limits finding to go")
    assert isinstance(after, dict)
    assert after[single]["firstSeen"] == before[single]["firstSeen"]
    assert after[single]["seq"] == before[single]["seq"]


def test_both_endpoints_through_gunicorn(server: str) -> None:
    import requests

    found = requests.get(f"{server}/search", params={"q": "demo_web"}, timeout=10)
    assert found.status_code == 200 and found.json()["results"]["services"][0]["name"] == "demo_web"

    def evaluated() -> dict[str, Any] | None:
        body: dict[str, Any] = requests.get(f"{server}/recommendations", timeout=10).json()
        return body if body["computedAt"] and body["total"] else None

    body = wait_for(evaluated, FINDING_WITHIN, interval=0.5, message="the engine's first evaluation under gunicorn")
    assert isinstance(body, dict) and body["summary"]["critical"] >= 1
    feed = requests.get(f"{server}/recommendations.atom", timeout=10)
    assert feed.status_code == 200 and feed.headers["Content-Type"].startswith("application/atom+xml")
