"""The authorization server through gunicorn on the lab swarm, auth mode headers, under a base path.

Raw HTTP (httpx): the discovery documents under ``server.base_path`` and their agreement, the challenge
of ``/mcp``, the consent page's headers and cookie, the authorize errors (page vs redirect), the CSRF
refusal, the warning about running without TLS; then the official SDK client's whole flow under the base
path (it finds the metadata at ``<base>/.well-known/openid-configuration``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn
from tests.integration.test_mcp_oauth_flow_live import HUMAN, Browser, Server, Storage, _list_tools, _provider

BASE_PATH = "/shoal"
CALLBACK = "http://127.0.0.1:40001/cb"


@pytest.fixture(scope="module")
def server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("gunicorn-oauth")
    port = free_port()
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_DATA_DIR=str(tmp / "state"),
                       SERVICE_BASE_PATH=BASE_PATH, SERVICE_AUTH_MODE="headers",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1/32", SERVICE_AUTH_HEADERS_SUBJECT="X-Forwarded-User",
                       SERVICE_AUTH_HEADERS_GROUPS="X-Forwarded-Groups")
    root = f"http://127.0.0.1:{port}"
    log_path: Path = tmp / "server.log"
    proc = launch_gunicorn(env, log_path, root + BASE_PATH)
    yield Server(root + BASE_PATH, env, log_path, proc)
    stop_gunicorn(proc, log_path)


@pytest.fixture(scope="module")
def client_id(server: Server) -> str:
    response = httpx.post(server.base + "/oauth/register", timeout=10, json={
        "redirect_uris": [CALLBACK], "client_name": "raw-agent", "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"], "token_endpoint_auth_method": "none"})
    assert response.status_code == 201, response.text
    value: str = response.json()["client_id"]
    return value


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _authorize(server: Server, client_id: str, **overrides: str | None) -> dict[str, str]:
    _, challenge = _pkce()
    params: dict[str, str | None] = {"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK,
                                     "code_challenge": challenge, "code_challenge_method": "S256", "state": "s1",
                                     "resource": server.mcp, **overrides}
    return {k: v for k, v in params.items() if v is not None}


def test_documents_under_the_base_path_agree(server: Server) -> None:
    root = server.base[: -len(BASE_PATH)]
    prm = httpx.get(server.base + "/.well-known/oauth-protected-resource", timeout=10)
    assert prm.status_code == 200 and prm.headers["Cache-Control"] == "max-age=3600"
    assert prm.json()["resource"] == server.mcp
    issuer = prm.json()["authorization_servers"][0]
    assert issuer == server.base
    assert httpx.get(server.base + "/.well-known/oauth-protected-resource/mcp", timeout=10).json() == prm.json()
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        metadata = httpx.get(server.base + path, timeout=10)
        assert metadata.status_code == 200 and metadata.headers["Cache-Control"] == "max-age=3600"
        assert metadata.json()["issuer"] == issuer
        assert metadata.json()["token_endpoint"] == server.base + "/oauth/token"
        assert metadata.json()["authorization_response_iss_parameter_supported"] is True
    assert httpx.get(root + "/.well-known/oauth-authorization-server", timeout=10).status_code == 404


def test_mcp_challenge_names_the_metadata_under_the_base_path(server: Server) -> None:
    response = httpx.post(server.mcp, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10,
                          headers={"Accept": "application/json, text/event-stream"})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == \
        f'Bearer realm="mcp", resource_metadata="{server.base}/.well-known/oauth-protected-resource"'


def test_consent_page_headers_and_cookie(server: Server, client_id: str) -> None:
    response = httpx.get(server.base + "/oauth/authorize", params=_authorize(server, client_id), headers=HUMAN,
                         timeout=10)
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["Cache-Control"] == "no-store"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and f"Path={BASE_PATH}/oauth/" in cookie
    assert "raw-agent" in response.text and "Self-reported identity" in response.text
    assert "127.0.0.1:40001" in response.text and "alice" in response.text


def test_the_human_must_come_through_the_proxy(server: Server, client_id: str) -> None:
    response = httpx.get(server.base + "/oauth/authorize", params=_authorize(server, client_id), timeout=10)
    assert response.status_code == 401
    assert "csrf_token" not in response.text


@pytest.mark.parametrize(("overrides", "error"), [
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": None}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"resource": "http://127.0.0.1:1/mcp"}, "invalid_target"),
    ({"resource": None}, "invalid_request"),
])
def test_authorize_errors_redirect_back(server: Server, client_id: str, overrides: dict[str, str | None],
                                        error: str) -> None:
    response = httpx.get(server.base + "/oauth/authorize", params=_authorize(server, client_id, **overrides),
                         headers=HUMAN, timeout=10)
    assert response.status_code == 302
    params = {k: v[0] for k, v in parse_qs(urlsplit(response.headers["Location"]).query).items()}
    assert response.headers["Location"].startswith(CALLBACK + "?")
    assert params["error"] == error and params["state"] == "s1" and params["iss"] == server.base


@pytest.mark.parametrize("redirect_uri", ["http://127.0.0.1:40001/cb/", "https://evil.example/cb"])
def test_unregistered_redirect_is_a_page(server: Server, client_id: str, redirect_uri: str) -> None:
    response = httpx.get(server.base + "/oauth/authorize", headers=HUMAN, timeout=10,
                         params=_authorize(server, client_id, redirect_uri=redirect_uri))
    assert response.status_code == 400 and "Location" not in response.headers
    assert response.headers["Content-Type"].startswith("text/html")


def test_approval_without_csrf_is_refused(server: Server, client_id: str) -> None:
    with httpx.Client(timeout=10, headers=HUMAN) as http:
        page = http.get(server.base + "/oauth/authorize", params=_authorize(server, client_id))
        fields: dict[str, Any] = {name: html.unescape(value) for name, value in
                                  re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)}
        fields.pop("csrf_token")
        refused = http.post(server.base + "/oauth/authorize", data={**fields, "decision": "approve"})
        assert refused.status_code == 400 and "Location" not in refused.headers
    with httpx.Client(timeout=10, headers=HUMAN) as other:   # a token without its cookie
        page = other.get(server.base + "/oauth/authorize", params=_authorize(server, client_id))
        fields = {name: html.unescape(value) for name, value in
                  re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)}
    refused = httpx.post(server.base + "/oauth/authorize", data={**fields, "decision": "approve"}, headers=HUMAN,
                         timeout=10)
    assert refused.status_code == 400 and "Location" not in refused.headers


def test_start_warns_about_plain_http(server: Server) -> None:
    assert "runs without TLS" in server.log.read_text()


def test_sdk_flow_under_the_base_path(server: Server) -> None:
    storage, browser = Storage(), Browser()
    assert "get_logs" in _list_tools(server, _provider(server, storage, browser))
    assert len(browser.authorize_urls) == 1
    assert browser.authorize_urls[0].startswith(server.base + "/oauth/authorize?")
    assert browser.result["iss"] == server.base
