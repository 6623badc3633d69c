"""The OpenAPI document at /api: valid, complete against the URL map, and documenting media types,
list parameters and problem responses."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from app.errors import ProblemError
from app.recommendations.findings import RESOURCE_TYPES
from app.resources import ResourceKind
from app.schemas.jsonld_keys import colliding_keywords, separate_keywords
from app.schemas.query_params import NOT_BLANK, choice_list_pattern
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


# /metrics/labels/ is /metrics/labels/{name} with an empty name, which the document calls invalid (minLength 1):
# the route only answers it with the 400 MTR006 a fuzzer expects of an invalid request.
UNDOCUMENTED_ROUTES = {"/metrics/labels/"}


def test_every_route_is_documented_with_its_methods(app: Flask, document: dict[str, Any]) -> None:
    routed = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule in UNDOCUMENTED_ROUTES:
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


# --------------------------------------------------------------------------- generators (docs/api-documents.md)
def component_validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    """A JSON Schema 2020-12 validator (OpenAPI 3.1's dialect) of one component, its $refs resolvable."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return Draft202012Validator(schema)


def test_no_component_has_a_keyword_and_a_property_of_one_python_name(document: dict[str, Any]) -> None:
    """openapi-python-client maps ``@id`` and ``id`` to one name and drops the schema (and all that use it)."""
    for name, schema in document["components"]["schemas"].items():
        assert colliding_keywords(schema) == [], name


def test_no_schema_anywhere_has_a_keyword_and_a_property_of_one_python_name(document: dict[str, Any]) -> None:
    """Inline and nested schemas too (a dry run's ``target`` has ``@id`` and ``id``)."""
    found: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if colliding_keywords(node):
                found.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(document, "#")
    assert found == []
    target = document["paths"]["/plugins/{name}/enable"]["post"]["responses"]["200"]["content"][JSON]["schema"]
    assert "^@id$" in target["properties"]["target"]["patternProperties"]


@pytest.mark.parametrize(("name", "body"), [
    ("ReferenceV1", {"@id": "/configs/c1", "id": "c1", "name": "app"}),
    ("TaskReferenceV1", {"@id": "/tasks/t1", "id": "t1", "name": "web.1", "state": "running",
                         "desiredState": "running"}),
    ("SearchHitV1", {"@id": "/services/s1", "id": "s1", "name": "web", "detail": "nginx", "match": "exact"}),
    ("ProblemV1", {"@context": "/api/context.jsonld", "@id": "/x", "@type": "Problem", "type": "about:blank",
                   "title": "Not Found", "status": 404}),
])
def test_json_ld_keywords_validate_as_before(document: dict[str, Any], name: str, body: dict[str, Any]) -> None:
    """Same wire format, same rules: the keyword is still typed, and closed objects stay closed."""
    validator = component_validator(document, name)
    assert list(validator.iter_errors(body)) == []
    keyword = "@type" if name == "ProblemV1" else "@id"
    assert list(validator.iter_errors({**body, keyword: 5}))       # still a string
    if document["components"]["schemas"][name].get("unevaluatedProperties") is False:
        assert list(validator.iter_errors({**body, "@idx": "/x"}))  # still no unknown member
    if name == "SearchHitV1":
        assert list(validator.iter_errors({k: v for k, v in body.items() if k != "@id"}))   # still required


def test_separate_keywords_moves_only_colliding_keywords() -> None:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["@id"], "properties": {
        "@context": {"type": "string"}, "@id": {"type": "string"}, "id": {"type": "integer"}}}
    assert separate_keywords(schema) is True
    assert set(schema["properties"]) == {"@context", "id"}
    assert schema["patternProperties"] == {"^@id$": {"type": "string"}}
    assert schema["unevaluatedProperties"] is False and "additionalProperties" not in schema
    assert schema["required"] == ["@id"]
    assert separate_keywords(schema) is False                         # idempotent
    open_schema: dict[str, Any] = {"properties": {"@type": {}, "type": {}}, "additionalProperties": True}
    assert separate_keywords(open_schema) and open_schema["additionalProperties"] is True
    assert "unevaluatedProperties" not in open_schema


# --------------------------------------------------------------------------- parameters as parsed
_BLANKS = "".join(chr(c) for c in range(0x3001) if chr(c).isspace()) + "\ufeff"


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(text=st.lists(st.sampled_from([*_BLANKS, ",", "a", "x", "N", "O", "D", "E", "node", "Cluster", "warning",
                                      "ode"]), max_size=8).map("".join))
def test_choice_list_patterns_agree_with_the_recommendation_filter(text: str) -> None:
    from app.http.recommendations import parse_filter

    pattern = choice_list_pattern(RESOURCE_TYPES)
    try:
        parse_filter({"kind": text})
        accepted = True
    except ProblemError:
        accepted = False
    assert (re.search(pattern, text) is not None) == accepted, repr(text)


@pytest.mark.parametrize("text", ["", " ", "\x1d", "\x85", "\u3000", "\ufeff", " a ", "x", "\x1d\ufeff"])
def test_not_blank_is_what_strip_keeps(text: str) -> None:
    assert (re.search(NOT_BLANK, text) is not None) == bool(text.strip())


def test_lenient_integers_document_that_any_text_is_accepted(document: dict[str, Any]) -> None:
    parameters = {p["name"]: p for p in document["paths"]["/services"]["get"]["parameters"] if p["in"] == "query"}
    for name in ("limit", "offset"):
        validator = Draft202012Validator(parameters[name]["schema"])
        assert validator.is_valid(5) and validator.is_valid("null") and validator.is_valid("-1")
        assert not validator.is_valid(None)      # query values are text or numbers, never JSON null
