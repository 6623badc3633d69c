"""Content negotiation: path extension > Accept > JSON default, per endpoint, and the 406 problems."""

from __future__ import annotations

import re

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.unit import objects as o

JSON = "application/json"
V1 = "application/vnd.service.v1+json"
PROBLEM = "application/problem+json"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

LIST, DETAIL, ERRORS, API = "/services", f"/services/{o.SVC_WEB}", "/api/errors", "/api"
ENDPOINTS = [LIST, DETAIL, ERRORS, API]
# Lists and details have feeds; these do not.
NO_FEED = [ERRORS, API, f"/services/{o.SVC_WEB}/tasks", f"/nodes/{o.NODE_MANAGER}/tasks"]
HTML_ENDPOINTS = [LIST, DETAIL, ERRORS, f"/configs/{o.CFG_SHOP}", "/stacks/shop", "/volumes",
                  "/api/errors/SVC003"]


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    """Every test here only reads: one app for the module."""
    return shared_client


def get(client: FlaskClient, path: str, accept: str | None) -> TestResponse:
    return client.get(path, headers={"Accept": accept} if accept is not None else {})


def assert_json(response: TestResponse, content_type: str = JSON) -> None:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == content_type
    body = response.get_json(force=True)
    assert isinstance(body, dict)


def assert_shell(response: TestResponse) -> None:
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    head = html.split("</head>", 1)[0]
    assert "<head>" in head
    assert re.search(r'<link rel="alternate" type="application/atom\+xml"[^>]*href="[^"]+\.atom"', head), head


def assert_problem(response: TestResponse, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM
    body = response.get_json(force=True)
    assert body["status"] == status
    assert body["type"] == f"/api/errors/{code}"
    assert body["code"] == code


# --------------------------------------------------------------------------- JSON by default
@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("accept", [None, "*/*", JSON, "application/*", "application/ld+json",
                                    "application/xml, application/json;q=0.1"])
def test_json_is_the_default_and_the_answer_to_json_accepts(client: FlaskClient, path: str,
                                                            accept: str | None) -> None:
    assert_json(get(client, path, accept))


@pytest.mark.parametrize("path", [LIST, DETAIL, ERRORS])
def test_versioned_media_type_is_answered_with_that_content_type(client: FlaskClient, path: str) -> None:
    response = get(client, path, V1)
    assert_json(response, V1)
    assert response.get_json(force=True) == get(client, path, JSON).get_json()


def test_the_openapi_document_is_plain_json_whatever_json_version_is_asked(client: FlaskClient) -> None:
    assert_json(get(client, API, V1), JSON)


# --------------------------------------------------------------------------- HTML
@pytest.mark.parametrize("path", HTML_ENDPOINTS)
@pytest.mark.parametrize("accept", ["text/html", BROWSER, "application/json;q=0.5, text/html;q=0.9"])
def test_browsers_get_the_dashboard_shell(client: FlaskClient, path: str, accept: str) -> None:
    assert_shell(get(client, path, accept))


def test_the_api_document_answers_browsers_with_html(client: FlaskClient) -> None:
    """GET /api with text/html serves the interactive explorer (an HTML page)."""
    response = get(client, API, "text/html")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/html"


def test_the_root_serves_the_shell(client: FlaskClient) -> None:
    assert_shell(get(client, "/", BROWSER))


# --------------------------------------------------------------------------- extensions
@pytest.mark.parametrize("path", [LIST, DETAIL, ERRORS, API])
@pytest.mark.parametrize("accept", ["text/html", "application/xml", V1, BROWSER])
def test_json_extension_wins_over_accept(client: FlaskClient, path: str, accept: str) -> None:
    assert_json(get(client, path + ".json", accept))


@pytest.mark.parametrize("path", [LIST, DETAIL, ERRORS])
@pytest.mark.parametrize("accept", [JSON, V1, "application/xml"])
def test_html_extension_wins_over_accept(client: FlaskClient, path: str, accept: str) -> None:
    assert_shell(get(client, path + ".html", accept))


def test_json_extension_serves_the_same_document(client: FlaskClient) -> None:
    assert client.get(DETAIL + ".json").get_json() == client.get(DETAIL).get_json()


# --------------------------------------------------------------------------- 406
@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("accept", ["application/xml", "image/png", "text/plain"])
def test_unproducible_types_are_406_api003(client: FlaskClient, path: str, accept: str) -> None:
    assert_problem(get(client, path, accept), 406, "API003")


@pytest.mark.parametrize("path", NO_FEED)
@pytest.mark.parametrize("accept", ["application/atom+xml", "application/feed+json"])
def test_feeds_where_none_exists_are_406_api003(client: FlaskClient, path: str, accept: str) -> None:
    assert_problem(get(client, path, accept), 406, "API003")


@pytest.mark.parametrize("path", NO_FEED)
def test_event_stream_where_none_is_offered_is_406_api001(client: FlaskClient, path: str) -> None:
    assert_problem(get(client, path, "text/event-stream"), 406, "API001")


@pytest.mark.parametrize("path", [LIST, DETAIL, "/stacks/shop", "/events"])
def test_event_stream_on_lists_details_stacks_and_events(client: FlaskClient, path: str) -> None:
    response = client.get(path, headers={"Accept": "text/event-stream"}, buffered=False)
    try:
        assert response.status_code == 200 and response.mimetype == "text/event-stream"
        assert next(response.iter_encoded()) == b"retry: 3000\n\n"   # headers and the first bytes at once
    finally:
        response.close()


@pytest.mark.parametrize("path", NO_FEED)
@pytest.mark.parametrize("extension", [".atom", ".feed.json"])
def test_feed_extension_where_no_feed_exists_is_406_api003(client: FlaskClient, path: str, extension: str) -> None:
    assert_problem(get(client, path + extension, None), 406, "API003")


def test_a_406_problem_carries_the_request_id(client: FlaskClient) -> None:
    response = client.get(LIST, headers={"Accept": "application/xml", "Request-Id": "neg-406"})
    assert response.get_json(force=True)["requestId"] == "neg-406"
    assert response.headers["Request-Id"] == "neg-406"


# --------------------------------------------------------------------------- Vary
@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("accept", [None, JSON, "text/html", "application/xml"])
def test_negotiated_responses_vary_on_accept(client: FlaskClient, path: str, accept: str | None) -> None:
    response = get(client, path, accept)
    assert "accept" in {value.strip().lower() for value in response.headers.get("Vary", "").split(",")}


@pytest.mark.parametrize("path", ["/-/health", "/-/ready", "/-/metrics"])
def test_meta_endpoints_do_not_vary_on_accept(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert "accept" not in response.headers.get("Vary", "").lower()


# --------------------------------------------------------------------------- media-range parameters
@pytest.mark.parametrize(("accept", "expected"), [
    ("application/json; charset=utf-8", JSON),
    ("application/vnd.service.v1+json; charset=utf-8", V1),
    ("application/json;q=0.5, application/vnd.service.v1+json; charset=utf-8;q=0.9", V1),
    ("application/ld+json; profile=\"https://www.w3.org/ns/json-ld#compacted\"", JSON),
])
def test_media_range_parameters_do_not_prevent_a_match(client: FlaskClient, accept: str, expected: str) -> None:
    for path in (LIST, DETAIL):
        assert_json(get(client, path, accept), expected)


def test_html_with_a_charset_parameter_gets_the_dashboard_shell(client: FlaskClient) -> None:
    response = get(client, LIST, "text/html; charset=utf-8")
    assert response.status_code == 200
    assert response.mimetype == "text/html"


def test_a_parameter_does_not_turn_a_refused_type_into_an_offered_one(client: FlaskClient) -> None:
    response = get(client, LIST, "application/xml; charset=utf-8")
    assert response.status_code == 406
    assert response.get_json(force=True)["code"] == "API003"


# --------------------------------------------------------------------------- the .html extension first
def test_the_html_extension_on_an_unknown_path_gets_the_shell_whatever_accept_says(client: FlaskClient) -> None:
    response = get(client, "/no/such/page.html", JSON)
    assert response.status_code == 200
    assert response.mimetype == "text/html"


def test_the_json_extension_on_an_unknown_path_is_a_404_problem_even_for_browsers(client: FlaskClient) -> None:
    response = get(client, "/no/such/page.json", BROWSER)
    assert response.status_code == 404
    assert response.mimetype == PROBLEM
    assert response.get_json(force=True)["instance"] == "/no/such/page.json"


def test_anything_at_quality_zero_is_not_acceptable(client: FlaskClient) -> None:
    response = get(client, LIST, "*/*;q=0")
    assert response.status_code == 406
    assert_json(get(client, LIST, "*/*"))
