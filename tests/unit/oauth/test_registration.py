"""``POST /oauth/register`` on an in-process app (FakeEngine): what a registration accepts and answers, the
per-address limit (trusted proxies included), the cap with least-recently-used eviction, and
registrations surviving a restart on the state store's file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app.oauth.addresses import client_address
from app.oauth.clients import client_registry, close_registry
from app.oauth.registration import MAX_BODY, RegistrationLimiter, init_registration
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

GOOD = {"client_name": "Test agent", "redirect_uris": ["http://127.0.0.1:33418/callback"],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}
PROXY = "10.9.0.5"   # inside the trusted_proxies of the app below


def _started(**settings: Any) -> Harness:
    harness = build_harness(FakeEngine(cluster()), **{"trusted_proxies": ("10.9.0.0/16",), **settings})
    init_registration(harness.app)   # what init_oauth does when the agent endpoint's OAuth server is on
    harness.start()
    return harness


def _stopped(harness: Harness) -> None:
    harness.stop()
    close_registry(harness.app)


@pytest.fixture(scope="module")
def app() -> Iterator[Flask]:
    """One app for the module; each request without an explicit peer comes from an address of its own, so
    the per-address limit (3 here) only bites where a test means it to."""
    harness = _started(mcp_dcr_rate_limit=3, mcp_dcr_max_clients=500)
    yield harness.app
    _stopped(harness)


_PEERS = (f"192.0.{third}.{fourth}" for third in range(100, 200) for fourth in range(1, 255))


def register(app: Flask, body: Any = None, *, peer: str | None = None, forwarded: str | None = None,
             raw: bytes | None = None, content_type: str = "application/json") -> Any:
    peer = peer or next(_PEERS)
    headers = {"Content-Type": content_type}
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    data = raw if raw is not None else json.dumps(GOOD if body is None else body).encode()
    return app.test_client().post("/oauth/register", data=data, headers=headers,
                                  environ_base={"REMOTE_ADDR": peer})


def test_a_registration_answers_201_with_a_public_client(app: Flask) -> None:
    response = register(app, {**GOOD, "scope": "mcp", "application_type": "native"})
    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    body = response.get_json()
    assert set(body) == {"client_id", "client_name", "redirect_uris", "grant_types", "response_types",
                         "token_endpoint_auth_method", "client_id_issued_at"}   # unknown members ignored
    assert body["token_endpoint_auth_method"] == "none" and "client_secret" not in body
    assert body["redirect_uris"] == GOOD["redirect_uris"] and body["client_name"] == "Test agent"
    assert isinstance(body["client_id_issued_at"], int)
    client = client_registry(app).lookup(body["client_id"])
    assert client.redirect_uris == ("http://127.0.0.1:33418/callback",) and not client.verified
    assert client.grant_types == ("authorization_code", "refresh_token")


def test_defaults_of_a_minimal_registration(app: Flask) -> None:
    body = register(app, {"redirect_uris": ["https://app.example.com/cb"]}).get_json()
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"] and body["token_endpoint_auth_method"] == "none"
    assert "client_name" not in body


@pytest.mark.parametrize("uris", [
    None, [], "https://app.example.com/cb", ["http://app.example.com/cb"], ["ftp://127.0.0.1/cb"],
    ["https://app.example.com/cb#top"], ["https://user:pw@app.example.com/cb"], ["/relative/cb"],
    ["com.example.app:/callback"], ["http://127.0.0.2/cb"], [42],
])
def test_bad_redirect_uris_are_refused(app: Flask, uris: Any) -> None:
    body = {**GOOD, "redirect_uris": uris} if uris is not None else {"client_name": "x"}
    response = register(app, body)
    assert response.status_code == 400
    assert response.get_json()["error"] == "invalid_redirect_uri"
    assert response.get_json()["error_description"]


@pytest.mark.parametrize("uri", ["http://localhost:8080/cb", "http://[::1]:9/cb", "https://app.example.com/cb?x=1"])
def test_loopback_http_and_https_redirects_are_accepted(app: Flask, uri: str) -> None:
    assert register(app, {**GOOD, "redirect_uris": [uri]}).status_code == 201


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "private_key_jwt", ""])
def test_secret_methods_are_refused(app: Flask, method: str) -> None:
    response = register(app, {**GOOD, "token_endpoint_auth_method": method})
    assert response.status_code == 400
    assert response.get_json()["error"] == "invalid_client_metadata"
    assert "public" in response.get_json()["error_description"]


@pytest.mark.parametrize("members", [
    {"grant_types": ["client_credentials"]}, {"grant_types": ["refresh_token"]}, {"grant_types": []},
    {"response_types": ["token"]}, {"response_types": "code"}, {"client_name": 7}, {"client_name": "x" * 201},
])
def test_other_bad_metadata_is_refused(app: Flask, members: dict[str, Any]) -> None:
    response = register(app, {**GOOD, **members})
    assert (response.status_code, response.get_json()["error"]) == (400, "invalid_client_metadata")


@pytest.mark.parametrize(("raw", "content_type"), [
    (b"{not json", "application/json"), (b"[1, 2]", "application/json"),
    (json.dumps(GOOD).encode(), "text/plain"), (json.dumps(GOOD).encode(), "application/x-www-form-urlencoded"),
])
def test_bodies_that_are_not_a_json_object_are_refused(app: Flask, raw: bytes, content_type: str) -> None:
    response = register(app, raw=raw, content_type=content_type)
    assert (response.status_code, response.get_json()["error"]) == (400, "invalid_client_metadata")


def test_a_body_over_64_kib_is_refused(app: Flask) -> None:
    padded = json.dumps({**GOOD, "padding": "x" * MAX_BODY}).encode()
    response = register(app, raw=padded)
    assert response.status_code == 413 and response.get_json()["error"] == "invalid_client_metadata"
    assert register(app, {**GOOD, "padding": "x" * (MAX_BODY - 1000)}).status_code == 201


# ---------------------------------------------------------------------------------------------- rate limit
def test_the_fourth_registration_from_one_address_gets_429(app: Flask) -> None:
    peer = "192.0.2.1"
    assert register(app, {"redirect_uris": "bad"}, peer=peer).status_code == 400    # refusals do not count
    for _ in range(3):
        assert register(app, peer=peer).status_code == 201
    refused = register(app, peer=peer)
    assert refused.status_code == 429
    assert refused.get_json()["error"] == "too_many_requests"
    assert 3590 <= int(refused.headers["Retry-After"]) <= 3600
    assert register(app, peer="192.0.2.2").status_code == 201           # another address is not affected


def test_behind_a_trusted_proxy_the_forwarded_client_counts(app: Flask) -> None:
    assert register(app, peer=PROXY, forwarded="203.0.113.7").status_code == 201
    for _ in range(2):
        assert register(app, peer=PROXY, forwarded="198.51.100.1, 203.0.113.7").status_code == 201
    assert register(app, peer=PROXY, forwarded="198.51.100.1, 203.0.113.7").status_code == 429
    # the left entry is the client's own claim: changing it changes nothing
    assert register(app, peer=PROXY, forwarded="198.51.100.99, 203.0.113.7").status_code == 429
    # another client behind the same proxy; a chain of two trusted proxies is walked past
    assert register(app, peer=PROXY, forwarded="203.0.113.8").status_code == 201
    assert register(app, peer=PROXY, forwarded="203.0.113.9, 10.9.3.3").status_code == 201


def test_an_untrusted_peer_cannot_pick_its_address(app: Flask) -> None:
    for number in range(3):
        assert register(app, peer="198.51.100.50", forwarded=f"203.0.113.{number}").status_code == 201
    assert register(app, peer="198.51.100.50", forwarded="203.0.113.200").status_code == 429


@pytest.mark.parametrize(("peer", "forwarded", "expected"), [
    ("198.51.100.1", "203.0.113.5", "198.51.100.1"),             # not a trusted proxy: its header is ignored
    ("10.9.0.5", None, "10.9.0.5"),                               # a trusted proxy that forwards nothing
    ("10.9.0.5", "203.0.113.5", "203.0.113.5"),
    ("10.9.0.5", "1.2.3.4, 203.0.113.5", "203.0.113.5"),         # the right-most untrusted entry
    ("10.9.0.5", "203.0.113.5, 10.9.8.8", "203.0.113.5"),        # past a second trusted proxy
    ("10.9.0.5", "203.0.113.5, not-an-address", "10.9.0.5"),     # a malformed entry ends the walk
    ("10.9.0.5", "2001:db8::7", "2001:db8::7"),
    ("10.9.0.5", "10.9.1.1", "10.9.1.1"),                         # only proxies: the left-most
    ("", "203.0.113.5", ""),                                      # a unix-socket peer has no address
])
def test_the_client_address(peer: str, forwarded: str | None, expected: str) -> None:
    environ = {"REMOTE_ADDR": peer, **({} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded})}
    assert client_address(environ, ("10.9.0.0/16",)) == expected


def test_the_limiter_frees_a_slot_an_hour_after_the_oldest() -> None:
    now = [0.0]
    limiter = RegistrationLimiter(2, clock=lambda: now[0])
    limiter.record("a")
    now[0] = 600.0
    limiter.record("a")
    now[0] = 1200.0
    assert limiter.retry_after("a") == 2400          # the first leaves the window at 3600
    assert limiter.retry_after("b") is None
    now[0] = 3600.0
    assert limiter.retry_after("a") is None
    limiter.record("a")
    assert limiter.retry_after("a") == 600            # the second (at 600) leaves at 4200


def test_the_limiter_keeps_a_bounded_number_of_addresses() -> None:
    limiter = RegistrationLimiter(1, max_addresses=2, clock=lambda: 5.0)
    for address in ("a", "b", "c"):
        limiter.record(address)
    assert limiter.retry_after("c") is not None and limiter.retry_after("b") is not None
    assert limiter.retry_after("a") is None           # the least recently seen was forgotten


# ---------------------------------------------------------------------------------------------- cap, restart
def test_the_cap_evicts_the_least_recently_used() -> None:
    harness = _started(mcp_dcr_rate_limit=100, mcp_dcr_max_clients=2)
    try:
        ids = [register(harness.app, {**GOOD, "client_name": f"c{n}"}).get_json()["client_id"] for n in range(3)]
        registry = client_registry(harness.app)
        with pytest.raises(Exception, match="not registered here"):
            registry.lookup(ids[0])
        assert [registry.lookup(i).client_name for i in ids[1:]] == ["c1", "c2"]
        assert registry.store.count() == 2
    finally:
        _stopped(harness)


def test_registrations_survive_a_restart(tmp_path: Path) -> None:
    first = _started(data_dir=str(tmp_path))
    try:
        assert first.runtime.store is not None and first.runtime.store.active
        client_id = register(first.app).get_json()["client_id"]
    finally:
        _stopped(first)
    second = _started(data_dir=str(tmp_path))
    try:
        client = client_registry(second.app).lookup(client_id)
        assert client.client_name == "Test agent" and client.redirect_uris == tuple(GOOD["redirect_uris"])
    finally:
        _stopped(second)


def test_without_persistence_registrations_are_kept_in_memory(app: Flask) -> None:
    client_id = register(app).get_json()["client_id"]
    assert type(client_registry(app).store).__name__ == "MemoryClients"
    assert client_registry(app).lookup(client_id).client_id == client_id


def test_registration_off_serves_no_endpoint_but_keeps_the_registry() -> None:
    harness = _started(mcp_dcr_enabled=False)
    try:
        assert register(harness.app).status_code == 404
        with pytest.raises(Exception, match="not registered here"):
            client_registry(harness.app).lookup("anything")
    finally:
        _stopped(harness)
