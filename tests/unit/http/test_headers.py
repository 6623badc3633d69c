"""Response headers: validators and 304s, Cache-Control, Allow, discovery Links, Request-Id, security
headers, cache freshness, and HEAD."""

from __future__ import annotations

import hashlib
import re

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.support import Harness, build_harness, wait_until

DETAIL = f"/services/{o.SVC_WEB}"
SERVICE_LAST_MODIFIED = "Thu, 02 May 2024 11:30:15 GMT"  # objects.UPDATED, to the second
SECURITY_HEADERS = ("X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Content-Security-Policy")


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    """Tests that only read share one app; tests that break things use ``harness``. Last-Modified is
    floored at the app's start: 0 here, so the fixture's engine times show."""
    shared_client.application.config["SHOAL_STARTED_AT"] = 0.0
    return shared_client


def links(response: TestResponse) -> dict[str, str]:
    """rel → target of every Link value."""
    found = {}
    for target, rel in re.findall(r'<([^>]*)>\s*;\s*rel="([^"]+)"', response.headers.get("Link", "")):
        found[rel] = target
    return found


# --------------------------------------------------------------------------- ETag and 304
@pytest.mark.parametrize("path", ["/services", DETAIL, "/api/errors", "/api", "/api/context.jsonld"])
def test_json_responses_carry_a_sha256_etag_of_the_body(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    digest = hashlib.sha256(response.get_data()).hexdigest()   # full, per variant
    suffix = "" if response.mimetype == "application/json" else "-" + response.mimetype.partition("/")[2]
    assert response.headers["ETag"] == f'"{digest}{suffix}"'


def test_the_etag_changes_with_the_body(harness: Harness) -> None:
    client = harness.app.test_client()
    first = client.get("/configs").headers["ETag"]
    assert client.get("/configs").headers["ETag"] == first
    harness.engine.objects[ResourceKind.CONFIG]["cfgnew"] = o.config("cfgnew", "new_config")
    harness.engine.emit("config", "create", "cfgnew")
    wait_until(lambda: harness.cache.get(ResourceKind.CONFIG, "cfgnew"), 2, message="the new config")
    assert client.get("/configs").headers["ETag"] != first


@pytest.mark.parametrize("header", [
    "{etag}", '"nope", {etag}', '{etag} , "other"', "W/{etag}", '"a", W/{etag}', "*",
])
@pytest.mark.parametrize("path", ["/services", DETAIL])
def test_if_none_match_gives_304_without_a_body(client: FlaskClient, path: str, header: str) -> None:
    etag = client.get(path).headers["ETag"]
    response = client.get(path, headers={"If-None-Match": header.format(etag=etag)})
    assert response.status_code == 304
    assert response.get_data() == b""
    assert response.headers["ETag"] == etag
    assert "Content-Type" not in response.headers
    assert response.headers.get("Request-Id")


def test_a_304_keeps_vary_and_cache_control(client: FlaskClient) -> None:
    etag = client.get(DETAIL).headers["ETag"]
    response = client.get(DETAIL, headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert "Accept" in response.headers["Vary"]
    assert response.headers["Cache-Control"] == "no-cache"


def test_if_none_match_with_another_etag_gives_200(client: FlaskClient) -> None:
    response = client.get(DETAIL, headers={"If-None-Match": '"0000", W/"1111"'})
    assert response.status_code == 200
    assert response.get_json()["@id"] == DETAIL


def test_json_resources_are_no_cache(client: FlaskClient) -> None:
    assert client.get("/services").headers["Cache-Control"] == "no-cache"
    assert client.get(DETAIL).headers["Cache-Control"] == "no-cache"


# --------------------------------------------------------------------------- Last-Modified
def test_detail_carries_last_modified_from_updated_at(client: FlaskClient) -> None:
    assert client.get(DETAIL).headers["Last-Modified"] == SERVICE_LAST_MODIFIED


@pytest.mark.parametrize(("path", "expected"), [
    (f"/networks/{o.NET_SHOP}", "Fri, 03 May 2024 08:00:00 GMT"),       # network: Created
    (f"/volumes/{o.VOL_SHOP}", "Sat, 04 May 2024 09:15:00 GMT"),        # volume: CreatedAt
    (f"/nodes/{o.NODE_WORKER}", SERVICE_LAST_MODIFIED),
    (f"/tasks/{o.TASK_WEB_1}", SERVICE_LAST_MODIFIED),
    (f"/configs/{o.CFG_SHOP}", SERVICE_LAST_MODIFIED),
    (f"/secrets/{o.SEC_SHOP}", SERVICE_LAST_MODIFIED),
])
def test_last_modified_per_kind(client: FlaskClient, path: str, expected: str) -> None:
    assert client.get(path).headers["Last-Modified"] == expected


@pytest.mark.parametrize(("created", "expected"), [
    ("2024-05-04T11:15:00+02:00", "Sat, 04 May 2024 09:15:00 GMT"),
    ("2024-05-04T04:15:00.123456789-05:00", "Sat, 04 May 2024 09:15:00 GMT"),
    ("2024-05-04T09:15:00.5Z", "Sat, 04 May 2024 09:15:00 GMT"),
])
def test_last_modified_honours_the_engines_utc_offset(harness: Harness, created: str, expected: str) -> None:
    harness.app.config["SHOAL_STARTED_AT"] = 0.0
    harness.cache.upsert(ResourceKind.VOLUME, {**o.volume("tz-volume"), "CreatedAt": created})
    client = harness.app.test_client()
    response = client.get("/volumes/tz-volume")
    assert response.headers["Last-Modified"] == expected
    assert client.get("/volumes/tz-volume", headers={"If-Modified-Since": expected}).status_code == 304
    before = client.get("/volumes/tz-volume", headers={"If-Modified-Since": "Sat, 04 May 2024 09:14:59 GMT"})
    assert before.status_code == 200


def test_stacks_and_lists_have_no_last_modified(client: FlaskClient) -> None:
    assert "Last-Modified" not in client.get("/stacks/shop").headers
    assert "Last-Modified" not in client.get("/services").headers


@pytest.mark.parametrize("since", [SERVICE_LAST_MODIFIED, "Fri, 03 May 2024 00:00:00 GMT"])
def test_if_modified_since_at_or_after_the_update_gives_304(client: FlaskClient, since: str) -> None:
    response = client.get(DETAIL, headers={"If-Modified-Since": since})
    assert response.status_code == 304
    assert response.get_data() == b""


def test_if_modified_since_before_the_update_gives_200(client: FlaskClient) -> None:
    response = client.get(DETAIL, headers={"If-Modified-Since": "Thu, 02 May 2024 11:30:14 GMT"})
    assert response.status_code == 200
    assert response.get_json()["service"]["ID"] == o.SVC_WEB


@pytest.mark.parametrize("since", ["yesterday", "Thu, 02 May 2024", ""])
def test_a_malformed_if_modified_since_is_ignored(client: FlaskClient, since: str) -> None:
    assert client.get(DETAIL, headers={"If-Modified-Since": since}).status_code == 200


def test_if_modified_since_is_ignored_without_last_modified(client: FlaskClient) -> None:
    response = client.get("/services", headers={"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"})
    assert response.status_code == 200


def test_a_304_keeps_the_security_headers(client: FlaskClient) -> None:
    etag = client.get("/services").headers["ETag"]
    response = client.get("/services", headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert_security_headers(response)


def test_if_none_match_wins_over_if_modified_since(client: FlaskClient) -> None:
    etag = client.get(DETAIL).headers["ETag"]
    later, earlier = "Fri, 03 May 2024 00:00:00 GMT", "Wed, 01 May 2024 00:00:00 GMT"
    mismatch = client.get(DETAIL, headers={"If-None-Match": '"other"', "If-Modified-Since": later})
    assert mismatch.status_code == 200
    match = client.get(DETAIL, headers={"If-None-Match": etag, "If-Modified-Since": earlier})
    assert match.status_code == 304


# --------------------------------------------------------------------------- static documents
@pytest.mark.parametrize("path", ["/api", "/api/context.jsonld"])
def test_static_documents_are_cacheable_for_an_hour(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "public, max-age=3600"


def test_context_document_is_json_ld(client: FlaskClient) -> None:
    response = client.get("/api/context.jsonld")
    assert response.mimetype == "application/ld+json"
    assert "@context" in response.get_json(force=True)


# --------------------------------------------------------------------------- Allow
@pytest.mark.parametrize("path", ["/services", f"{DETAIL}/labels", "/stacks/shop", f"/nodes/{o.NODE_WORKER}/tasks",
                                  "/api", "/api/errors", "/api/errors/SVC003"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_reads_list_the_allowed_methods(client: FlaskClient, path: str, method: str) -> None:
    response = client.open(path, method=method)
    assert response.status_code == 200
    assert response.headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(("method", "path"), [("POST", "/services"), ("DELETE", "/services"), ("PUT", DETAIL),
                                              ("PATCH", "/configs"), ("POST", "/api")])
def test_a_disallowed_method_is_405_with_allow(client: FlaskClient, method: str, path: str) -> None:
    response = client.open(path, method=method)
    assert response.status_code == 405
    allowed = {m.strip() for m in response.headers["Allow"].split(",")}
    assert {"GET", "HEAD"} <= allowed
    assert method not in allowed


# --------------------------------------------------------------------------- discovery Links
@pytest.mark.parametrize(("path", "headers"), [
    ("/services", {}), (DETAIL, {}), ("/services/missing", {}), ("/api", {}), ("/api/errors", {}),
    ("/api/context.jsonld", {}), ("/services", {"Accept": "text/html"}),
    ("/services", {"Accept": "image/png"}),
    ("/unknown/path", {}), ("/unknown/path", {"Accept": "text/html"}), ("/", {"Accept": "text/html"}),
])
def test_every_response_links_the_service_description_and_context(client: FlaskClient, path: str,
                                                                    headers: dict[str, str]) -> None:
    rels = links(client.get(path, headers=headers))
    assert rels["service-desc"] == "/api"
    assert rels["describedby"] == "/api/context.jsonld"


def test_a_405_links_the_service_description(client: FlaskClient) -> None:
    assert "service-desc" in links(client.post("/services"))


@pytest.mark.parametrize("path", ["/-/health", "/-/ready", "/-/metrics"])
def test_meta_endpoints_carry_no_discovery_links(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert "service-desc" not in response.headers.get("Link", "")
    assert "describedby" not in response.headers.get("Link", "")


# --------------------------------------------------------------------------- Request-Id
@pytest.mark.parametrize("value", ["abc-123", "x" * 64, "a b~c!", "trace:0f1e2d3c4b5a"])
def test_a_valid_request_id_is_echoed(client: FlaskClient, value: str) -> None:
    assert client.get("/services", headers={"Request-Id": value}).headers["Request-Id"] == value


@pytest.mark.parametrize("value", ["x" * 65, "bad\x01id", "bad\x7fid", "caf\u00e9", "tab\there"])
def test_an_invalid_request_id_is_replaced(client: FlaskClient, value: str) -> None:
    response = client.get("/services", headers={"Request-Id": value})
    generated = response.headers["Request-Id"]
    assert generated != value
    assert re.fullmatch(r"[0-9a-f]{32}", generated)


def test_a_request_id_is_generated_when_absent_and_differs_per_request(client: FlaskClient) -> None:
    first = client.get("/services").headers["Request-Id"]
    second = client.get("/services").headers["Request-Id"]
    assert re.fullmatch(r"[\x21-\x7e]{1,64}", first)
    assert first != second


@pytest.mark.parametrize("path", ["/-/health", "/api", "/missing", DETAIL])
def test_every_response_has_a_request_id(client: FlaskClient, path: str) -> None:
    assert client.get(path).headers.get("Request-Id")


def test_the_request_id_appears_in_error_bodies(client: FlaskClient) -> None:
    response = client.get("/services/missing", headers={"Request-Id": "req-42"})
    assert response.headers["Request-Id"] == "req-42"
    assert response.get_json()["requestId"] == "req-42"
    generated = client.get("/services/missing")
    assert generated.get_json()["requestId"] == generated.headers["Request-Id"]


# --------------------------------------------------------------------------- security headers
def assert_security_headers(response: TestResponse) -> None:
    for name in SECURITY_HEADERS:
        assert response.headers.get(name), f"{name} missing on {response.status}"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] in ("DENY", "SAMEORIGIN")
    assert "Strict-Transport-Security" not in response.headers


@pytest.mark.parametrize(("path", "headers", "status"), [
    ("/services", {}, 200), ("/", {"Accept": "text/html"}, 200), ("/services/missing", {}, 404),
    ("/nope", {}, 404), ("/services", {"Accept": "application/xml"}, 406), ("/-/health", {}, 200),
])
def test_security_headers_on_every_status(client: FlaskClient, path: str, headers: dict[str, str],
                                          status: int) -> None:
    response = client.get(path, headers=headers)
    assert response.status_code == status
    assert_security_headers(response)


def test_security_headers_on_a_500(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(kind: ResourceKind) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(harness.cache, "entries", broken)
    response = harness.app.test_client().get("/services")
    assert response.status_code == 500
    assert_security_headers(response)


def test_plain_http_is_served_without_redirect_or_hsts(client: FlaskClient) -> None:
    response = client.get("/services", base_url="http://shoal.example")
    assert response.status_code == 200
    assert "Strict-Transport-Security" not in response.headers
    assert "Location" not in response.headers


def test_hsts_is_sent_when_tls_is_enabled(fake_engine) -> None:  # type: ignore[no-untyped-def]
    built = build_harness(fake_engine, tls_cert="/tls/cert.pem", tls_key="/tls/key.pem")
    response = built.app.test_client().get("/-/health", base_url="https://shoal.example")
    assert response.status_code == 200
    hsts = response.headers["Strict-Transport-Security"]
    assert "max-age=63072000" in hsts and "includeSubDomains" in hsts


# --------------------------------------------------------------------------- freshness
@pytest.mark.parametrize("path", ["/services", DETAIL, "/stacks", "/stacks/shop"])
def test_cached_responses_say_how_fresh_they_are(shared_harness: Harness, path: str) -> None:
    response = shared_harness.app.test_client().get(path)
    assert response.headers["Cache-Sequence"] == str(shared_harness.cache.freshness.seq)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", response.headers["Engine-Last-Contact"])
    assert response.headers["Cache-Freshness"] == "live"


def test_the_sequence_header_follows_changes(harness: Harness) -> None:
    client = harness.app.test_client()
    before = int(client.get("/volumes").headers["Cache-Sequence"])
    harness.engine.objects[ResourceKind.VOLUME]["fresh_volume"] = o.volume("fresh_volume")
    harness.engine.emit("volume", "create", "fresh_volume")
    wait_until(lambda: harness.cache.get(ResourceKind.VOLUME, "fresh_volume"), 2, message="the new volume")
    assert int(client.get("/volumes").headers["Cache-Sequence"]) == before + 1


def test_after_engine_loss_cached_data_is_served_as_stale(harness: Harness) -> None:
    client = harness.app.test_client()
    contact = client.get("/services").headers["Engine-Last-Contact"]
    harness.engine.available = False
    harness.engine.close()
    wait_until(lambda: not harness.cache.freshness.connected, 2, message="the disconnect")
    response = client.get("/services")
    assert response.status_code == 200
    assert response.get_json()["total"] == 3
    assert response.headers["Cache-Freshness"] == "stale"
    assert response.headers["Engine-Last-Contact"] == contact
    detail = client.get(DETAIL)
    assert detail.status_code == 200 and detail.headers["Cache-Freshness"] == "stale"
    harness.engine.available = True
    wait_until(lambda: harness.cache.freshness.connected, 2, message="the reconnect")
    assert client.get("/services").headers["Cache-Freshness"] == "live"


# --------------------------------------------------------------------------- HEAD
@pytest.mark.parametrize("path", [
    "/services", DETAIL, "/tasks", f"/tasks/{o.TASK_WEB_1}", "/stacks/shop", f"/volumes/{o.VOL_SHOP}",
    f"/services/{o.SVC_WEB}/tasks", "/api", "/api/context.jsonld", "/api/errors", "/api/errors/SVC003",
    "/-/health", "/-/ready", "/", "/services.json", "/services/missing",
])
def test_head_answers_like_get_without_a_body(client: FlaskClient, path: str) -> None:
    got = client.get(path)
    head = client.head(path)
    assert head.status_code == got.status_code
    assert head.get_data() == b""
    assert head.headers.get("Content-Type") == got.headers.get("Content-Type")
    assert head.headers.get("ETag") == got.headers.get("ETag")
    assert head.headers.get("Content-Length") == got.headers.get("Content-Length")


@pytest.mark.parametrize("path", ["/no/such/page", "/dashboard/settings"])
def test_head_on_a_client_side_route_answers_like_get(client: FlaskClient, path: str) -> None:
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    got = client.get(path, headers=browser)
    head = client.head(path, headers=browser)
    assert got.status_code == 200
    assert (head.status_code, head.mimetype) == (got.status_code, got.mimetype)
    assert head.get_data() == b""


def test_head_works_on_the_self_metrics(client: FlaskClient) -> None:
    response = client.head("/-/metrics")
    assert response.status_code == 200
    assert response.get_data() == b""
    assert response.mimetype == "text/plain"


def test_head_honours_if_none_match(client: FlaskClient) -> None:
    etag = client.head(DETAIL).headers["ETag"]
    assert client.head(DETAIL, headers={"If-None-Match": etag}).status_code == 304


# --------------------------------------------------------------------------- outside the base path
@pytest.fixture
def prefixed(fake_engine) -> Harness:  # type: ignore[no-untyped-def]
    return build_harness(fake_engine, base_path="/shoal")


def test_a_path_outside_the_base_path_is_a_404_problem(prefixed: Harness) -> None:
    response = prefixed.app.test_client().get("/services")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json(force=True)["requestId"] == response.headers["Request-Id"]


def test_a_problem_outside_the_base_path_names_the_path_as_requested(prefixed: Harness) -> None:
    body = prefixed.app.test_client().get("/services.json").get_json(force=True)
    assert body["instance"] == body["@id"] == "/services.json"
    assert body["@context"] == "/shoal/api/context.jsonld"


def test_a_path_outside_the_base_path_echoes_the_request_id(prefixed: Harness) -> None:
    response = prefixed.app.test_client().get("/services", headers={"Request-Id": "outside-1"})
    assert response.headers["Request-Id"] == "outside-1"
    assert response.get_json(force=True)["requestId"] == "outside-1"


def test_a_path_outside_the_base_path_has_the_security_headers(prefixed: Harness) -> None:
    response = prefixed.app.test_client().get("/services")
    for name in SECURITY_HEADERS:
        assert response.headers.get(name), f"{name} missing"
