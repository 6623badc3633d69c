"""/topology over HTTP: JGF/GraphML/DOT by Accept and by extension, 406s (Atom API003, SSE API001), the
JSON-LD members and ETag of the JSON form, the legacy views' deprecation headers, and that the graph
extensions are only taken off /topology."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.unit.topology.dot_syntax import parse


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    return shared_client


def problem_code(body: dict[str, Any]) -> str:
    return str(body["type"]).rsplit("/", 1)[-1]


@pytest.mark.parametrize(("accept", "mimetype"), [
    (None, "application/json"), ("*/*", "application/json"), ("application/json", "application/json"),
    ("application/vnd.jgf+json", "application/vnd.jgf+json"), ("application/ld+json", "application/json"),
    ("application/vnd.service.v1+json", "application/vnd.service.v1+json"),
    ("application/graphml+xml", "application/graphml+xml"), ("text/vnd.graphviz", "text/vnd.graphviz"),
    ("text/vnd.graphviz;q=0.5, application/graphml+xml", "application/graphml+xml"),
    ("text/html", "text/html"),
])
def test_accept_selects_the_format(client: FlaskClient, accept: str | None, mimetype: str) -> None:
    response = client.get("/topology", headers={"Accept": accept} if accept else {})
    assert response.status_code == 200 and response.mimetype == mimetype
    assert "Accept" in response.headers["Vary"]


@pytest.mark.parametrize(("suffix", "mimetype"), [
    (".jgf", "application/vnd.jgf+json"), (".json", "application/json"), (".graphml", "application/graphml+xml"),
    (".dot", "text/vnd.graphviz"), (".html", "text/html")])
def test_extension_selects_the_format(client: FlaskClient, suffix: str, mimetype: str) -> None:
    response = client.get("/topology" + suffix, headers={"Accept": "application/json"})
    assert response.status_code == 200 and response.mimetype == mimetype


@pytest.mark.parametrize(("headers", "path", "code"), [
    ({"Accept": "application/atom+xml"}, "/topology", "API003"), ({}, "/topology.atom", "API003"),
    ({}, "/topology.feed.json", "API003"), ({"Accept": "text/event-stream"}, "/topology", "API001"),
    ({"Accept": "image/png"}, "/topology", "API003")])
def test_unproducible_requests_are_406(client: FlaskClient, headers: dict[str, str], path: str, code: str) -> None:
    response = client.get(path, headers=headers)
    assert response.status_code == 406 and problem_code(response.get_json()) == code


def test_json_form_is_jgf_with_jsonld_members(client: FlaskClient) -> None:
    response = client.get("/topology", headers={"Accept": "application/vnd.jgf+json"})
    body = response.get_json()
    assert (body["@context"], body["@id"], body["@type"]) == ("/api/context.jsonld", "/topology", "Topology")
    assert [graph["id"] for graph in body["graphs"]] == ["network", "placement"]
    etag = response.headers["ETag"]
    again = client.get("/topology", headers={"Accept": "application/vnd.jgf+json", "If-None-Match": etag})
    assert again.status_code == 304


def test_graphml_and_dot_bodies_parse(client: FlaskClient) -> None:
    root = ET.fromstring(client.get("/topology.graphml").data)
    assert len(root.findall("{http://graphml.graphdrawing.org/xmlns}graph")) == 2
    parsed = parse(client.get("/topology.dot").get_data(as_text=True))
    assert parsed.name == "network" and parsed.edges


def test_graph_extensions_are_not_taken_off_other_paths(client: FlaskClient) -> None:
    """``/services.dot`` is no route (the shim leaves the suffix alone there): a 404, not a 500."""
    response = client.get("/services.dot", headers={"Accept": "application/json"})
    assert response.status_code == 404


@pytest.mark.parametrize(("path", "object_type"), [("/topology/networks", "NetworkTopology"),
                                                   ("/topology/placement", "PlacementTopology")])
def test_legacy_views_are_deprecated(client: FlaskClient, path: str, object_type: str) -> None:
    response = client.get(path)
    assert response.status_code == 200 and response.get_json()["@type"] == object_type
    assert response.headers["Deprecation"] == "true"
    assert '</topology>; rel="successor-version"' in response.headers["Link"]
    assert 'rel="service-desc"' in response.headers["Link"]
