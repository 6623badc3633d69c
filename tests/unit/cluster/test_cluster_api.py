"""/cluster, /cluster/capacity, /disk-usage and /stacks/summary over HTTP: JSON-LD envelopes, negotiation
(HTML shell, 406s), ETag/304, the readiness gate, and /stacks/summary winning over /stacks/<name>."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.blueprints.cluster import SYSTEM_KEY
from app.engine.system import SystemInfo
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.cluster.test_disk_usage import DF, FakeSystem, api_error
from tests.unit.support import Harness, build_harness, wait_until

PATHS = ["/cluster", "/cluster/capacity", "/disk-usage", "/stacks/summary"]


@pytest.fixture
def system(harness: Harness) -> FakeSystem:
    fake = FakeSystem(df=DF, node_id="nodemanager1")
    harness.app.extensions[SYSTEM_KEY] = SystemInfo(lambda: fake)
    return fake


def problem_code(body: dict[str, Any]) -> str:
    return str(body["type"]).rsplit("/", 1)[-1]


def test_cluster_is_a_jsonld_cluster_document(client: FlaskClient, system: FakeSystem) -> None:
    response = client.get("/cluster")
    body = response.get_json()
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert (body["@context"], body["@id"], body["@type"]) == ("/api/context.jsonld", "/cluster", "Cluster")
    assert body["nodeCount"] == 3 and body["tasksByState"]["running"] == 4
    assert response.headers["ETag"] and "GET" in response.headers["Allow"]


def test_cluster_local_node_id_appears_once_fetched(client: FlaskClient, system: FakeSystem) -> None:
    assert "localNodeID" not in client.get("/cluster").get_json()
    wait_until(lambda: "localNodeID" in client.get("/cluster").get_json(), message="the local node id fetched")
    assert client.get("/cluster").get_json()["localNodeID"] == "nodemanager1"
    assert system.info_calls == 1


def test_capacity_document(client: FlaskClient) -> None:
    body = client.get("/cluster/capacity").get_json()
    assert body["@type"] == "ClusterCapacity" and body["nodeCount"] == 3 and len(body["nodes"]) == 3
    assert set(body) >= {"maxNodeCPU", "maxNodeMemory", "totalCPU", "totalMemory", "reserved", "available"}


def test_disk_usage_is_a_collection_of_four(client: FlaskClient, system: FakeSystem) -> None:
    body = client.get("/disk-usage").get_json()
    assert body["@type"] == "Collection" and body["total"] == 4 and body["limit"] == 4 and body["offset"] == 0
    assert [item["type"] for item in body["items"]] == ["images", "containers", "volumes", "buildCache"]


@pytest.mark.parametrize(("status", "code"), [(501, "SWM004"), (500, "SWM005")])
def test_disk_usage_engine_errors_are_problems(client: FlaskClient, harness: Harness, status: int, code: str) -> None:
    harness.app.extensions[SYSTEM_KEY] = SystemInfo(lambda: FakeSystem(error=api_error(status)))
    response = client.get("/disk-usage")
    assert response.status_code == status and response.mimetype == "application/problem+json"
    assert problem_code(response.get_json()) == code


def test_stacks_summary_lists_stacks(client: FlaskClient) -> None:
    body = client.get("/stacks/summary").get_json()
    assert body["@type"] == "Collection" and [item["name"] for item in body["items"]] == ["shop"]
    assert client.get("/stacks/shop").get_json()["@type"] == "Stack"   # the detail route still works


@pytest.fixture
def summary_stack() -> Iterator[Harness]:
    objects = o.cluster()
    objects[ResourceKind.SERVICE].append(o.service(o.engine_id("svcsummaryweb"), "summary_web", stack="summary"))
    built = build_harness(FakeEngine(objects))
    built.start()
    yield built
    built.stop()


def test_stacks_summary_wins_over_a_stack_named_summary(summary_stack: Harness) -> None:
    client = summary_stack.app.test_client()
    body = client.get("/stacks/summary").get_json()
    assert body["@type"] == "Collection" and [item["name"] for item in body["items"]] == ["shop", "summary"]
    assert client.get("/stacks/summary.json").get_json()["@type"] == "Collection"
    assert "summary" in [item["name"] for item in client.get("/stacks").get_json()["items"]]


@pytest.mark.parametrize("path", PATHS)
def test_html_gets_the_shell(client: FlaskClient, system: FakeSystem, path: str) -> None:
    response = client.get(path, headers={"Accept": "text/html"})
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert client.get(path + ".html").mimetype == "text/html"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("accept", "code"), [("application/atom+xml", "API003"), ("text/event-stream", "API001"),
                                              ("image/png", "API003")])
def test_unproducible_types_are_406(client: FlaskClient, system: FakeSystem, path: str, accept: str,
                                    code: str) -> None:
    response = client.get(path, headers={"Accept": accept})
    assert response.status_code == 406 and problem_code(response.get_json()) == code


@pytest.mark.parametrize("path", PATHS)
def test_atom_extension_is_406(client: FlaskClient, system: FakeSystem, path: str) -> None:
    response = client.get(path + ".atom")
    assert response.status_code == 406 and problem_code(response.get_json()) == "API003"


@pytest.mark.parametrize("path", ["/cluster", "/cluster/capacity", "/stacks/summary"])
def test_etag_gives_304(client: FlaskClient, path: str) -> None:
    etag = client.get(path).headers["ETag"]
    assert client.get(path, headers={"If-None-Match": etag}).status_code == 304
    assert client.head(path).status_code == 200


def test_versioned_json(client: FlaskClient) -> None:
    response = client.get("/cluster", headers={"Accept": "application/vnd.service.v1+json"})
    assert response.mimetype == "application/vnd.service.v1+json" and response.get_json()["@type"] == "Cluster"


@pytest.mark.parametrize("path", [*PATHS, "/topology", "/topology.dot", "/topology.graphml", "/topology/networks",
                                  "/topology/placement"])
def test_before_the_first_sync_reads_are_503(unsynced: Harness, path: str) -> None:
    client = unsynced.app.test_client()
    response = client.get(path)
    assert response.status_code == 503 and problem_code(response.get_json()) == "ENG001"
    page = client.get(path, headers={"Accept": "text/html"})   # the extension wins over Accept
    assert page.status_code == 503   # a page, not an empty cluster shown as current
    if not path.endswith((".dot", ".graphml")):
        assert page.mimetype == "text/html" and b"ENG001" in page.data and page.headers["Retry-After"] == "1"
