"""``/mcp`` on the stateless revision (2026-07-28): discovery answered at once, the routing headers checked
against the body, result decoration, the error → HTTP status table, and the handshake-only parts refused."""

from __future__ import annotations

import base64
import time

from app.mcp import registry
from tests.unit.mcp.test_transport_support import MODERN, SESSION, VERSION, error_of, mcp, modern, modern_meta
from tests.unit.support import Harness

__all__ = ["mcp"]
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def test_discover_answers_at_once_with_every_revision_and_the_cache_fields(mcp: Harness) -> None:
    client = mcp.app.test_client()
    began = time.monotonic()
    answer = modern(client, "server/discover")
    assert time.monotonic() - began < 1.0
    assert answer.status_code == 200 and SESSION not in answer.headers
    body = answer.get_json()
    assert body["id"] == 3
    result = body["result"]
    assert result["supportedVersions"] == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert result["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert "logging" not in result["capabilities"]
    assert result["resultType"] == "complete" and result["ttlMs"] == 0 and result["cacheScope"] == "private"
    assert result["_meta"][SERVER_INFO]["name"] == "shoal"


def test_discover_with_a_handshake_header_fails_at_once(mcp: Harness) -> None:
    client = mcp.app.test_client()
    began = time.monotonic()
    answer = modern(client, "server/discover", headers={VERSION: "2025-11-25"})
    assert time.monotonic() - began < 1.0
    assert answer.status_code == 400   # the SDK's auto mode falls back on it without waiting


def test_every_result_carries_result_type_and_cacheable_ones_the_cache_fields(mcp: Harness) -> None:
    client = mcp.app.test_client()
    listing = modern(client, "tools/list").get_json()["result"]
    assert listing["resultType"] == "complete" and listing["ttlMs"] == 0 and listing["cacheScope"] == "private"
    assert listing["_meta"][SERVER_INFO]["name"] == "shoal"
    assert isinstance(listing["tools"], list)


def test_routing_headers_must_agree_with_the_body(mcp: Harness) -> None:
    client = mcp.app.test_client()
    wrong_method = modern(client, "tools/list", headers={"Mcp-Method": "resources/list"})
    assert wrong_method.status_code == 400 and error_of(wrong_method)["code"] == -32020
    no_method = modern(client, "tools/list", headers={"Mcp-Method": ""})
    assert no_method.status_code == 400 and error_of(no_method)["code"] == -32020
    wrong_name = modern(client, "resources/read", {"uri": "service://cluster"}, name="service://history")
    assert wrong_name.status_code == 400 and error_of(wrong_name)["code"] == -32020
    call = modern(client, "tools/call", {"name": "search", "arguments": {"query": "web"}}, name="get_logs")
    assert call.status_code == 400 and error_of(call)["code"] == -32020
    assert call.get_json()["id"] == 3


def test_a_base64_name_header_is_decoded(mcp: Harness) -> None:
    client = mcp.app.test_client()
    uri = "service://cluster"
    encoded = "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
    answer = modern(client, "resources/read", {"uri": uri}, name=encoded)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    result = answer.get_json()["result"]
    assert result["contents"][0]["uri"] == uri and result["ttlMs"] == 0 and result["resultType"] == "complete"
    garbled = modern(client, "resources/read", {"uri": uri}, name="=?base64?!!!?=")
    assert garbled.status_code == 400 and error_of(garbled)["code"] == -32020


def test_a_modern_envelope_without_the_header_is_a_mismatch(mcp: Harness) -> None:
    client = mcp.app.test_client()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    answer = client.post("/mcp", json=body, headers={"Mcp-Method": "tools/list"})
    assert answer.status_code == 400 and error_of(answer)["code"] == -32020


def test_an_envelope_without_meta_is_invalid_params(mcp: Harness) -> None:
    client = mcp.app.test_client()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answer = client.post("/mcp", json=body, headers={VERSION: MODERN, "Mcp-Method": "tools/list"})
    assert answer.status_code == 400 and error_of(answer)["code"] == -32602


def test_an_unknown_version_is_unsupported_with_the_supported_list(mcp: Harness) -> None:
    client = mcp.app.test_client()
    meta = {**modern_meta(), "io.modelcontextprotocol/protocolVersion": "2030-01-01"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    answer = client.post("/mcp", json=body, headers={VERSION: "2030-01-01", "Mcp-Method": "server/discover"})
    assert answer.status_code == 400
    error = error_of(answer)
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
                             "requested": "2030-01-01"}


def test_unknown_and_handshake_only_methods_are_404(mcp: Harness) -> None:
    client = mcp.app.test_client()
    for method in ("no/such", "ping", "initialize", "logging/setLevel", "resources/subscribe"):
        answer = modern(client, method)
        assert answer.status_code == 404 and error_of(answer)["code"] == -32601, method


def test_batches_and_posted_responses_are_invalid_and_notifications_202(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = {VERSION: MODERN, "Mcp-Method": "tools/list"}
    batch = client.post("/mcp", json=[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], headers=headers)
    assert batch.status_code == 400 and error_of(batch)["code"] == -32600
    response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "result": {}}, headers=headers)
    assert response.status_code == 400 and error_of(response)["code"] == -32600
    note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/cancelled"}, headers=headers)
    assert note.status_code == 202 and note.get_data() == b""


def test_get_and_delete_are_405_at_this_revision(mcp: Harness) -> None:
    client = mcp.app.test_client()
    for method in ("get", "delete"):
        answer = getattr(client, method)("/mcp", headers={VERSION: MODERN})
        assert answer.status_code == 405 and answer.headers["Allow"] == "POST"
        assert error_of(answer)["code"] == -32600


def test_no_request_opens_a_session(mcp: Harness) -> None:
    client = mcp.app.test_client()
    modern(client, "server/discover")
    modern(client, "tools/list")
    assert not registry.subscribers(mcp.app)
