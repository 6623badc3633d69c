"""CORS (app.http.cors): origins, preflight before authentication, exposed headers, the stream refusal, and
the configuration keys that drive it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.config import ConfigError, load_settings
from app.http.cors import ALLOW_HEADERS, EXPOSE_HEADERS, CorsPolicy, is_same_origin
from tests.fakes import FakeEngine
from tests.unit.support import build_harness

PAGE = "http://127.0.0.1:9000"
OTHER = "http://evil.example"
HEADERS_AUTH: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User",
                                "trusted_proxies": ("127.0.0.1/32",)}


def _client(fake_engine: FakeEngine, **settings: Any) -> Iterator[FlaskClient]:
    harness = build_harness(fake_engine, **settings)
    harness.start()
    try:
        yield harness.app.test_client()
    finally:
        harness.stop()


@pytest.fixture
def client(fake_engine: FakeEngine) -> Iterator[FlaskClient]:
    """CORS on for PAGE, authentication by trusted headers (so a preflight without them would be a 401)."""
    yield from _client(fake_engine, cors_origins=(PAGE,), **HEADERS_AUTH)


@pytest.fixture
def client_off(fake_engine: FakeEngine) -> Iterator[FlaskClient]:
    yield from _client(fake_engine)


# --------------------------------------------------------------------------- the policy
@pytest.mark.parametrize(("origins", "origin", "allowed"), [
    ((PAGE,), PAGE, True), ((PAGE,), PAGE.upper(), True), ((PAGE,), OTHER, False),
    (("*",), OTHER, True), (("*",), "null", False), ((), PAGE, False), ((PAGE,), "", False),
])
def test_policy_allows_listed_origins_only(origins: tuple[str, ...], origin: str, allowed: bool) -> None:
    assert CorsPolicy(origins).allows(origin) is allowed


@pytest.mark.parametrize(("origin", "host", "same"), [
    ("http://shoal.example", "shoal.example", True), ("http://shoal.example:80", "shoal.example", True),
    ("https://shoal.example", "shoal.example:443", True), ("http://127.0.0.1:8080", "127.0.0.1:8080", True),
    ("http://127.0.0.1:9000", "127.0.0.1:8080", False), ("null", "shoal.example", False),
    ("http://shoal.example.evil", "shoal.example", False),
])
def test_same_origin_compares_origin_with_host(origin: str, host: str, same: bool) -> None:
    assert is_same_origin(origin, host) is same


# --------------------------------------------------------------------------- configuration
def test_origins_are_normalised_as_browsers_send_them() -> None:
    settings = load_settings({"SERVICE_CORS_ORIGINS": "HTTPS://UI.Example:443, http://127.0.0.1:9000/,"
                                                      "http://[::1]:80"}, search_paths=())
    assert settings.cors_origins == ("https://ui.example", "http://127.0.0.1:9000", "http://[::1]")
    assert load_settings({"SERVICE_CORS_ORIGINS": " * "}, search_paths=()).cors_origins == ("*",)
    assert not load_settings({}, search_paths=()).report.not_implemented


@pytest.mark.parametrize("value", ["ftp://x.example", "https://x.example/path", "*, https://x.example",
                                   "x.example", "https://user@x.example", "https://x.example:99999"])
def test_a_bad_origin_fails_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.cors\.origins / SERVICE_CORS_ORIGINS"):
        load_settings({"SERVICE_CORS_ORIGINS": value}, search_paths=())


def test_credentials_need_listed_origins() -> None:
    with pytest.raises(ConfigError, match="not \\*"):
        load_settings({"SERVICE_CORS_ORIGINS": "*", "SERVICE_CORS_CREDENTIALS": "true"}, search_paths=())
    settings = load_settings({"SERVICE_CORS_ORIGINS": PAGE, "SERVICE_CORS_CREDENTIALS": "true"}, search_paths=())
    assert settings.cors_credentials is True


# --------------------------------------------------------------------------- over HTTP
def test_preflight_from_an_allowed_origin_is_answered_before_authentication(client: FlaskClient) -> None:
    response = client.options("/services", headers={"Origin": PAGE, "Access-Control-Request-Method": "PATCH",
                                                    "Access-Control-Request-Headers": "if-match, content-type"})
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == PAGE
    assert "PATCH" in response.headers["Access-Control-Allow-Methods"].split(", ")
    allowed = {h.lower() for h in response.headers["Access-Control-Allow-Headers"].split(", ")}
    assert {"if-match", "content-type", "authorization", "idempotency-key", "last-event-id"} <= allowed
    assert response.headers["Access-Control-Max-Age"] == "86400"
    assert "Origin" in response.headers["Vary"]
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_preflight_from_another_origin_stays_an_authenticated_options(client: FlaskClient) -> None:
    response = client.options("/services", headers={"Origin": OTHER, "Access-Control-Request-Method": "GET"})
    assert response.status_code == 401
    assert not any(name.startswith("Access-Control-") for name, _ in response.headers.items())


def test_plain_options_with_an_allowed_origin_is_still_authenticated(client: FlaskClient) -> None:
    assert client.options("/services", headers={"Origin": PAGE}).status_code == 401


def test_answers_to_an_allowed_origin_echo_it_and_expose_headers(client: FlaskClient) -> None:
    response = client.get("/services", headers={"Origin": PAGE, "X-User": "ann"})
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == PAGE
    exposed = response.headers["Access-Control-Expose-Headers"].split(", ")
    assert {"ETag", "Link", "Allow", "Request-Id", "Content-Range", "Retry-After", "Location"} <= set(exposed)
    assert "Origin" in response.headers["Vary"]
    refused = client.get("/services", headers={"Origin": PAGE})             # a problem is readable too
    assert refused.status_code == 401 and refused.headers["Access-Control-Allow-Origin"] == PAGE


def test_another_origin_gets_no_cors_header(client: FlaskClient) -> None:
    response = client.get("/services", headers={"Origin": OTHER, "X-User": "ann"})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Origin" in response.headers["Vary"]


@pytest.mark.parametrize("path", ["/events", "/services"])
def test_a_stream_for_another_origin_is_refused_before_it_starts(client: FlaskClient, path: str) -> None:
    response = client.get(path, headers={"Origin": OTHER, "Accept": "text/event-stream", "X-User": "ann"})
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["code"] == "SSE003"


def test_a_stream_for_an_allowed_origin_is_served(client: FlaskClient) -> None:
    response = client.get("/events", headers={"Origin": PAGE, "Accept": "text/event-stream", "X-User": "ann"},
                          buffered=False)
    try:
        assert response.status_code == 200 and response.mimetype == "text/event-stream"
        assert response.headers["Access-Control-Allow-Origin"] == PAGE
    finally:
        response.close()


def test_with_cors_off_there_is_no_header_and_cross_origin_streams_are_refused(client_off: FlaskClient) -> None:
    response = client_off.get("/services", headers={"Origin": PAGE})
    assert response.status_code == 200 and "Access-Control-Allow-Origin" not in response.headers
    assert "Origin" not in response.headers.get("Vary", "")
    preflight = client_off.options("/services", headers={"Origin": PAGE, "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 200 and "Access-Control-Allow-Origin" not in preflight.headers
    stream = client_off.get("/events", headers={"Origin": PAGE, "Accept": "text/event-stream"})
    assert stream.status_code == 403 and stream.get_json()["code"] == "SSE003"
    same = client_off.get("/services", headers={"Origin": "http://localhost", "Accept": "application/json"})
    assert same.status_code == 200


def test_credentials_are_allowed_only_when_configured(fake_engine: FakeEngine) -> None:
    for client in _client(fake_engine, cors_origins=(PAGE,), cors_credentials=True):
        preflight = client.options("/services", headers={"Origin": PAGE, "Access-Control-Request-Method": "GET"})
        answer = client.get("/services", headers={"Origin": PAGE})
        assert preflight.headers["Access-Control-Allow-Credentials"] == "true"
        assert answer.headers["Access-Control-Allow-Credentials"] == "true"


def test_the_lists_hold_what_the_reference_names() -> None:
    assert {"Accept", "Authorization", "Content-Type", "If-None-Match", "Request-Id"} <= set(ALLOW_HEADERS)
    assert {"ETag", "Link", "Allow", "Location", "Retry-After", "Request-Id"} <= set(EXPOSE_HEADERS)


def test_the_openapi_document_describes_the_preflight(client: FlaskClient) -> None:
    document = client.get("/api").get_json()
    assert "204" in document["paths"]["/services"]["options"]["responses"]
