"""/topology against the lab swarm: the logical graph joins the demo and ops services that share overlay
networks (demo_web and demo_api on demo_backend, demo_web and ops_probe on demo_frontend with demo_web's
alias www, ops_probe and ops_agent on ops_mesh), stacks are hyperedges, and each placement hyperedge holds
exactly the tasks ``docker service ps`` shows as current. GraphML and DOT through gunicorn parse. Every
response is checked against /api by the integration conftest."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient

from tests.conftest import docker_lines, wait_for
from tests.unit.topology.dot_syntax import parse

pytestmark = pytest.mark.integration
GML = "{http://graphml.graphdrawing.org/xmlns}"


@pytest.fixture
def client(live_client: FlaskClient) -> FlaskClient:
    return live_client


cli = docker_lines


def graphs(client: FlaskClient) -> dict[str, dict[str, Any]]:
    response = client.get("/topology", headers={"Accept": "application/vnd.jgf+json"})
    assert response.status_code == 200 and response.mimetype == "application/vnd.jgf+json"
    return {graph["id"]: graph for graph in response.get_json()["graphs"]}


def service_keys(graph: dict[str, Any]) -> dict[str, str]:
    return {node["label"]: key for key, node in graph["nodes"].items() if node["metadata"]["kind"] == "service"}


def test_logical_edges_follow_shared_overlays(client: FlaskClient) -> None:
    logical = graphs(client)["network"]
    keys = service_keys(logical)
    edges = {frozenset((edge["source"], edge["target"])): edge for edge in logical["edges"]}

    def networks(first: str, second: str) -> dict[str, dict[str, Any]]:
        edge = edges.get(frozenset((keys[first], keys[second])))
        assert edge is not None, f"no edge {first} -- {second}"
        return {network["name"]: network for network in edge["metadata"]["networks"]}

    assert "demo_backend" in networks("demo_web", "demo_api")
    frontend = networks("demo_web", "ops_probe")["demo_frontend"]
    assert frontend["driver"] == "overlay" and frontend["id"].startswith("urn:service:network:")
    assert "www" in frontend["aliases"][keys["demo_web"]]   # and "web", the stack adds the service name
    assert "ops_mesh" in networks("ops_probe", "ops_agent")
    assert frozenset((keys["demo_api"], keys["ops_agent"])) not in edges   # no network in common
    web = logical["nodes"][keys["demo_web"]]["metadata"]
    assert web["ports"] == ["18080:8080/tcp"] and web["image"] == "local/busybox:latest" and web["replicas"] == 1
    stacks = {hyper["metadata"]["name"]: set(hyper["nodes"]) for hyper in logical["hyperedges"]}
    assert {keys[name] for name in ("demo_web", "demo_api", "demo_ticker", "demo_crasher", "demo_pending")} \
        == stacks["demo"]


def test_placement_matches_docker_service_ps(client: FlaskClient, docker_host: str) -> None:
    def agree(service: str) -> bool:
        current = cli(docker_host, "service", "ps", "-q", "--no-trunc", "-f", "desired-state=running", service)
        placement = graphs(client)["placement"]
        key = service_keys(placement)[service]
        hyper = next(h for h in placement["hyperedges"] if h["nodes"][0] == key)
        tasks = {task["id"].rsplit(":", 1)[-1] for task in hyper["metadata"]["tasks"]}
        nodes = {task["node"] for task in hyper["metadata"]["tasks"]}
        return tasks == set(current) and set(hyper["nodes"][1:]) == nodes and all(n in placement["nodes"]
                                                                                for n in nodes)
    for service in ("demo_api", "demo_web", "ops_agent"):
        wait_for(lambda service=service: agree(service), 20, interval=0.5,   # type: ignore[misc]
                 message=f"placement of {service} equal to docker service ps")


def test_graph_formats_through_gunicorn(server: str) -> None:
    graphml = requests.get(f"{server}/topology.graphml", timeout=10)
    assert graphml.status_code == 200 and graphml.headers["Content-Type"].startswith("application/graphml+xml")
    root = ET.fromstring(graphml.content)
    labels = {data.text for data in root.iter(GML + "data") if data.get("key") == "d_label"}
    assert {"demo_web", "demo_api", "shoal-n1"} <= labels or {"demo_web", "demo_api"} <= labels
    dot = requests.get(f"{server}/topology", headers={"Accept": "text/vnd.graphviz"}, timeout=10)
    assert dot.status_code == 200 and dot.headers["Content-Type"].startswith("text/vnd.graphviz")
    parsed = parse(dot.text)
    assert parsed.name == "network" and len(parsed.edges) >= 3
    assert {"demo_web", "ops_probe"} <= {attrs.get("label") for attrs in parsed.attributes.values()}
    jgf = requests.get(f"{server}/topology.jgf", timeout=10)
    assert jgf.headers["Content-Type"] == "application/vnd.jgf+json" and jgf.json()["@type"] == "Topology"
    assert requests.get(f"{server}/topology", headers={"If-None-Match": jgf.headers["ETag"],
                                                       "Accept": "application/vnd.jgf+json"},
                        timeout=10).status_code in (200, 304)
    for headers, path, code in (({"Accept": "application/atom+xml"}, "/topology", "API003"),
                                ({}, "/topology.atom", "API003"),
                                ({"Accept": "text/event-stream"}, "/topology", "API001")):
        refused = requests.get(f"{server}{path}", headers=headers, timeout=10)
        assert refused.status_code == 406 and refused.json()["type"].endswith(code)


def test_legacy_views_through_gunicorn(server: str) -> None:
    for path in ("/topology/networks", "/topology/placement"):
        response = requests.get(f"{server}{path}", timeout=10)
        assert response.status_code == 200 and response.headers["Deprecation"] == "true"
        assert '</topology>; rel="successor-version"' in response.headers["Link"]
    networks = requests.get(f"{server}/topology/networks", timeout=10).json()
    assert "demo_backend" in {network["name"] for network in networks["networks"]}
