"""``/mcp`` on the handshake revisions (2024-11-05 … 2025-11-25): initialize and its session, the session and
revision headers, batches, the JSON-RPC error paths, the body bound, the Origin check, the session cap, the
bearer challenge, DELETE, and that no answer of the path is ever a page."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from app.auth.identity import AuthenticationFailed
from app.mcp import registry
from app.mcp.registry import CallContext
from tests.unit.mcp.test_transport_support import (
    LATEST,
    SESSION,
    VERSION,
    error_of,
    initialize,
    make_harness,
    mcp,
    open_session,
    rpc,
)
from tests.unit.support import Harness

__all__ = ["mcp"]


# ---------------------------------------------------------------------------------------- initialize
def test_initialize_mints_a_session_and_answers_the_revision(mcp: Harness) -> None:
    client = mcp.app.test_client()
    answer = initialize(client)
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    session_id = answer.headers[SESSION]
    assert len(session_id) >= 22 and all(0x21 <= ord(c) <= 0x7E for c in session_id)
    result = answer.get_json()["result"]
    assert result["protocolVersion"] == LATEST
    assert result["serverInfo"]["name"] == "shoal" and result["serverInfo"]["version"]
    assert result["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["capabilities"]["logging"] == {} and result["capabilities"]["completions"] == {}
    assert initialize(client).headers[SESSION] != session_id   # every initialize: a new session


@pytest.mark.parametrize(("offered", "answered"), [("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"),
                                                    ("2026-07-28", LATEST), ("1999-01-01", LATEST)])
def test_initialize_counter_offers_the_latest_handshake_revision_it_does_not_speak(
        mcp: Harness, offered: str, answered: str) -> None:
    result = initialize(mcp.app.test_client(), offered).get_json()["result"]
    assert result["protocolVersion"] == answered
    assert ("completions" in result["capabilities"]) is (answered != "2024-11-05")


def test_initialize_without_a_protocol_version_is_invalid_params(mcp: Harness) -> None:
    answer = rpc(mcp.app.test_client(), "initialize", {"capabilities": {}})
    assert answer.status_code == 400 and error_of(answer)["code"] == -32602 and SESSION not in answer.headers


# ------------------------------------------------------------------------------- session and revision
def test_a_request_without_a_session_is_400_and_an_unknown_one_404(mcp: Harness) -> None:
    client = mcp.app.test_client()
    missing = rpc(client, "ping", headers={VERSION: LATEST})
    assert missing.status_code == 400 and error_of(missing)["code"] == -32600
    assert missing.get_json()["id"] == 7
    unknown = rpc(client, "ping", headers={VERSION: LATEST, SESSION: "no-such-session"})
    assert unknown.status_code == 404 and error_of(unknown)["code"] == -32600


def test_a_session_is_bound_to_the_subject_that_opened_it(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client, **{"X-Agent": "alice"})
    assert rpc(client, "ping", headers=headers).get_json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    stolen = rpc(client, "ping", headers={**headers, "X-Agent": "mallory"})
    assert stolen.status_code == 404   # another subject's session reads as unknown
    assert client.delete("/mcp", headers={**headers, "X-Agent": "mallory"}).status_code == 404
    assert rpc(client, "ping", headers=headers).status_code == 200   # still alice's


def test_the_revision_header_must_be_the_sessions_and_missing_means_the_session_s(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    other = rpc(client, "ping", headers={**headers, VERSION: "2025-06-18"})
    assert other.status_code == 400 and error_of(other)["code"] == -32600
    unsupported = rpc(client, "ping", headers={**headers, VERSION: "2031-01-01"})
    assert unsupported.status_code == 400
    error = error_of(unsupported)
    assert error["code"] == -32022 and error["data"]["requested"] == "2031-01-01"
    assert "2024-11-05" in error["data"]["supported"] and "2026-07-28" in error["data"]["supported"]
    headerless = {SESSION: headers[SESSION]}
    assert rpc(client, "ping", headers=headerless).status_code == 200


def test_delete_ends_the_session(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    session = registry.subscribers(mcp.app).copy().pop()
    assert client.delete("/mcp", headers=headers).status_code == 204
    assert session not in registry.subscribers(mcp.app)
    assert rpc(client, "ping", headers=headers).status_code == 404
    assert client.delete("/mcp", headers=headers).status_code == 404
    assert client.delete("/mcp", headers={VERSION: LATEST}).status_code == 400


def test_notifications_and_client_responses_are_accepted_with_an_empty_202(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    for body in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
                 {"jsonrpc": "2.0", "method": "notifications/unknown"},
                 {"jsonrpc": "2.0", "id": 99, "result": {}},
                 {"jsonrpc": "2.0", "id": 98, "error": {"code": -1, "message": "no"}}):
        answer = client.post("/mcp", json=body, headers=headers)
        assert answer.status_code == 202 and answer.get_data() == b"", body
    session = next(iter(registry.subscribers(mcp.app)))
    assert getattr(session, "initialized", False) is True


def test_logging_set_level_is_stored_per_session(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    assert rpc(client, "logging/setLevel", {"level": "warning"}, headers).get_json()["result"] == {}
    session = next(iter(registry.subscribers(mcp.app)))
    assert getattr(session, "log_level", None) == "warning"
    wrong = rpc(client, "logging/setLevel", {"level": "loud"}, headers)
    assert wrong.status_code == 200 and error_of(wrong)["code"] == -32602


# ----------------------------------------------------------------------------------------- batches
def test_batches_are_answered_as_arrays_on_2025_03_26_sessions(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client, "2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "b", "method": "no/such"},
             {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
             {"jsonrpc": "1.0", "id": 5, "method": "ping"}]
    answer = client.post("/mcp", json=batch, headers=headers)
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    body = answer.get_json()
    assert [item["id"] for item in body] == [1, "b", 4, 5]   # a readable id is kept even on an invalid request
    assert body[0]["result"] == {}
    assert [item["error"]["code"] for item in body[1:]] == [-32601, -32600, -32600]
    only_notes = client.post("/mcp", json=[{"jsonrpc": "2.0", "method": "notifications/initialized"}],
                             headers=headers)
    assert only_notes.status_code == 202 and only_notes.get_data() == b""
    empty = client.post("/mcp", json=[], headers=headers)
    assert empty.status_code == 400 and error_of(empty)["code"] == -32600


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batches_are_refused_on_later_revisions(mcp: Harness, version: str) -> None:
    client = mcp.app.test_client()
    headers = open_session(client, version)
    answer = client.post("/mcp", json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}], headers=headers)
    assert answer.status_code == 400 and error_of(answer)["code"] == -32600


# ------------------------------------------------------------------------------------ error paths
def test_parse_error_and_invalid_requests(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    broken = client.post("/mcp", data=b'{"jsonrpc": "2.0", ', content_type="application/json", headers=headers)
    assert broken.status_code == 400 and error_of(broken)["code"] == -32700 and broken.get_json()["id"] is None
    for body in ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 1},
                 {"jsonrpc": "2.0", "id": 1, "method": 5}, {"jsonrpc": "2.0", "id": None, "method": "ping"},
                 {"jsonrpc": "2.0", "id": True, "method": "ping"},
                 {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, "ping", 17):
        answer = client.post("/mcp", data=json.dumps(body), content_type="application/json", headers=headers)
        assert answer.status_code == 400 and error_of(answer)["code"] == -32600, body


def test_unknown_and_other_family_methods_are_method_not_found(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    for method in ("no/such", "server/discover", "subscriptions/listen", "notifications/initialized"):
        answer = rpc(client, method, {}, headers)
        assert answer.status_code == 200 and error_of(answer)["code"] == -32601, method


@pytest.fixture
def broken_method() -> Iterator[str]:
    def explode(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("secret internals")

    registry.METHODS["test/explode"] = explode
    yield "test/explode"
    del registry.METHODS["test/explode"]


def test_an_unexpected_failure_is_internal_error_with_the_request_id_and_no_traceback(
        mcp: Harness, broken_method: str, caplog: pytest.LogCaptureFixture) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    with caplog.at_level(logging.ERROR, logger="app.mcp.transport"):
        answer = rpc(client, broken_method, {}, {**headers, "Request-Id": "req-123"})
    assert answer.status_code == 200
    error = error_of(answer)
    assert error["code"] == -32603 and error["data"] == {"requestId": "req-123"}
    assert "secret internals" not in answer.get_data(as_text=True) and "Traceback" not in answer.get_data(as_text=True)
    assert any(record.exc_info and "secret internals" in str(record.exc_info[1]) for record in caplog.records)


def test_a_body_over_the_bound_is_413_json(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_max_body_bytes=1024):
        client = harness.app.test_client()
        headers = open_session(client)
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 2000}}
        answer = client.post("/mcp", json=big, headers=headers)
        assert answer.status_code == 413 and error_of(answer)["code"] == -32600
        small = {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x" * 500}}
        assert client.post("/mcp", json=small, headers=headers).get_json()["result"] == {}


def test_other_methods_are_405_json_and_no_answer_is_a_page(mcp: Harness) -> None:
    client = mcp.app.test_client()
    for method in ("put", "patch"):
        answer = getattr(client, method)("/mcp", json={})
        assert answer.status_code == 405 and error_of(answer)["code"] == -32600
        assert set(answer.headers["Allow"].split(", ")) == {"GET", "POST", "DELETE"}


def test_the_session_cap_answers_server_busy_with_a_retry_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_max_sessions=2):
        client = harness.app.test_client()
        open_session(client)
        open_session(client)
        answer = initialize(client)
        assert answer.status_code == 503 and SESSION not in answer.headers
        error = error_of(answer)
        assert error["code"] == -32000 and answer.get_json()["id"] == 1
        retry = error["data"]["retryAfterSeconds"]
        assert isinstance(retry, int) and 1 <= retry <= 3600 and answer.headers["Retry-After"] == str(retry)


def test_a_refused_bearer_is_401_with_its_challenge(mcp: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: Any) -> Any:
        raise AuthenticationFailed("A bearer token is required.", challenge='Bearer realm="mcp", resource_metadata="x"')

    monkeypatch.setattr("app.oauth.bearer.authenticate_agent", refuse)
    answer = initialize(mcp.app.test_client())
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith('Bearer realm="mcp"')
    assert "bearer token is required" in error_of(answer)["message"]


def test_the_agent_identity_is_set_before_dispatch(mcp: Harness) -> None:
    seen: list[tuple[str, str | None]] = []

    def who(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        from flask import g

        seen.append((g.identity.subject, g.mcp_client_id))
        return {}

    registry.METHODS["test/who"] = who
    try:
        client = mcp.app.test_client()
        headers = open_session(client, **{"X-Agent": "alice"})
        assert rpc(client, "test/who", {}, headers).status_code == 200
    finally:
        del registry.METHODS["test/who"]
    assert seen == [("alice", "client-1")]


# ------------------------------------------------------------------------------------------ Origin
@pytest.mark.parametrize(("origin", "allowed"), [
    ("http://localhost", True), ("http://LOCALHOST:80", True), ("https://agents.example", True),
    ("https://issuer.example", True), ("https://app.example", True), ("http://evil.example", False),
    ("null", False), ("http://localhost:8080", False), ("not a url", False)])
def test_origin_must_be_this_service_or_a_configured_one(monkeypatch: pytest.MonkeyPatch, origin: str,
                                                          allowed: bool) -> None:
    for harness in make_harness(monkeypatch, external_url="https://agents.example",
                                mcp_issuer="https://issuer.example/shoal", cors_origins=("https://app.example",)):
        answer = initialize(harness.app.test_client(), Origin=origin)
        if allowed:
            assert answer.status_code == 200
        else:
            assert answer.status_code == 403 and error_of(answer)["code"] == -32600
            assert SESSION not in answer.headers


def test_the_own_origin_is_seen_through_trusted_proxies_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, trusted_proxies=("127.0.0.1/32",)):
        client = harness.app.test_client()
        forwarded = {"Origin": "https://agents.internal", "X-Forwarded-Proto": "https",
                     "X-Forwarded-Host": "agents.internal"}
        assert initialize(client, **forwarded).status_code == 200
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": LATEST}}
        untrusted = client.post("/mcp", json=body, headers=forwarded, environ_base={"REMOTE_ADDR": "10.9.9.9"})
        assert untrusted.status_code == 403


def test_no_origin_is_a_non_browser_agent_and_passes(mcp: Harness) -> None:
    assert initialize(mcp.app.test_client()).status_code == 200


def test_an_accept_of_only_event_streams_gets_the_answer_as_one_event(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    answer = rpc(client, "ping", headers={**headers, "Accept": "text/event-stream"})
    assert answer.status_code == 200 and answer.mimetype == "text/event-stream"
    text = answer.get_data(as_text=True)
    assert text.startswith("id: 0\nretry: 3000\ndata: \n\n")   # the priming event (2025-11-25)
    assert text.endswith('data: {"jsonrpc":"2.0","id":7,"result":{}}\n\n')
