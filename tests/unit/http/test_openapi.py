"""The OpenAPI document at /api: valid, complete against the URL map, and documenting media types,
list parameters and problem responses."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from openapi_spec_validator import validate

from app.resources import ResourceKind
from tests.unit.support import Harness, build_harness

JSON, V1, HTML = "application/json", "application/vnd.service.v1+json", "text/html"
PROBLEM = "application/problem+json"
PROBLEM_SCHEMA = {"$ref": "#/components/schemas/ProblemV1"}
LISTS = [kind.spec.path for kind in ResourceKind]
DETAILS = [f"{kind.spec.path}/{{{kind.spec.id_placeholder}}}" for kind in ResourceKind]
SUBLISTS = ["/nodes/{id}/tasks", "/services/{id}/tasks"]
RESOURCE_GETS = LISTS + DETAILS + SUBLISTS


@pytest.fixture(scope="module")
def document(shared_harness: Harness) -> dict[str, Any]:
    response = shared_harness.app.test_client().get("/api")
    assert response.status_code == 200
    body: dict[str, Any] = response.get_json()
    return body


@pytest.fixture
def app(shared_harness: Harness) -> Flask:
    return shared_harness.app


def openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def test_the_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(document)
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Shoal"
    assert document["servers"] == [{"url": "/"}]


def test_every_route_is_documented_with_its_methods(app: Flask, document: dict[str, Any]) -> None:
    routed = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        methods = {m.lower() for m in rule.methods or ()} - {"head"}   # Flask answers OPTIONS on every rule
        routed.setdefault(openapi_path(rule.rule), set()).update(methods)   # a URL's methods may come from
        #                                                                     several blueprints (reads, writes)
    documented = {path: {m for m in ops if m != "parameters"} for path, ops in document["paths"].items()}
    assert set(routed) == set(documented)
    for path, methods in routed.items():
        assert methods == documented[path], path


@pytest.mark.parametrize("path", [*RESOURCE_GETS, "/api/errors", "/api/errors/{code}"])
def test_resource_gets_document_json_the_versioned_type_and_html(document: dict[str, Any], path: str) -> None:
    content = document["paths"][path]["get"]["responses"]["200"]["content"]
    assert {JSON, V1, HTML} <= set(content)
    assert content[V1]["schema"] == content[JSON]["schema"]
    assert "$ref" in content[JSON]["schema"]


@pytest.mark.parametrize("path", RESOURCE_GETS)
def test_resource_gets_document_not_modified(document: dict[str, Any], path: str) -> None:
    assert "304" in document["paths"][path]["get"]["responses"]


def problem_statuses(document: dict[str, Any], path: str) -> set[str]:
    responses = document["paths"][path]["get"]["responses"]
    return {status for status, response in responses.items()
            if response.get("content", {}).get(PROBLEM, {}).get("schema") == PROBLEM_SCHEMA}


@pytest.mark.parametrize("path", LISTS)
def test_lists_document_their_problem_responses(document: dict[str, Any], path: str) -> None:
    assert {"400", "406", "416", "500", "503"} <= problem_statuses(document, path)


@pytest.mark.parametrize("path", [*DETAILS, *SUBLISTS, "/api/errors/{code}"])
def test_details_document_their_problem_responses(document: dict[str, Any], path: str) -> None:
    assert {"404", "406", "500"} <= problem_statuses(document, path)


def test_every_get_documents_a_problem_default(document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method != "parameters":
                assert operation["responses"]["default"]["content"][PROBLEM], (path, method)


def test_the_problem_schema_has_the_rfc_9457_members(document: dict[str, Any]) -> None:
    properties = document["components"]["schemas"]["ProblemV1"]["properties"]
    assert {"@context", "type", "title", "status", "detail", "instance", "requestId"} <= set(properties)


@pytest.mark.parametrize("path", LISTS)
def test_lists_document_their_query_parameters_and_range(document: dict[str, Any], path: str) -> None:
    parameters = document["paths"][path]["get"]["parameters"]
    query = {p["name"] for p in parameters if p["in"] == "query"}
    assert {"limit", "offset", "sort", "dir", "search", "filter"} <= query
    assert any(p["in"] == "header" and p["name"] == "Range" for p in parameters)


@pytest.mark.parametrize("path", DETAILS)
def test_details_document_their_path_parameter(document: dict[str, Any], path: str) -> None:
    name = path.rsplit("{", 1)[1].rstrip("}")
    item = document["paths"][path]
    parameters = [*item.get("parameters", []), *item["get"].get("parameters", [])]
    assert any(p["in"] == "path" and p["name"] == name and p["required"] for p in parameters)


def test_every_get_documents_the_media_type_of_its_success(document: dict[str, Any]) -> None:
    """A client (or a fuzzer) must know what a 200 is: /api is JSON, /-/metrics text/plain, / HTML..."""
    undocumented = sorted(path for path, operations in document["paths"].items()
                          if "get" in operations and not operations["get"]["responses"]["200"].get("content"))
    assert undocumented == []


def test_the_document_follows_the_base_path(fake_engine) -> None:  # type: ignore[no-untyped-def]
    built = build_harness(fake_engine, base_path="/shoal")
    client: FlaskClient = built.app.test_client()
    response = client.get("/shoal/api")
    assert response.status_code == 200
    assert response.get_json()["servers"] == [{"url": "/shoal"}]
    assert '</shoal/api>; rel="service-desc"' in response.headers["Link"]
    assert client.get("/api").status_code == 404
