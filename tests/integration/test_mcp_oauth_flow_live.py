"""The official MCP Python SDK's OAuth client against gunicorn on the lab swarm, auth mode headers.

``OAuthClientProvider`` is wired into the SDK client's httpx2 client. Its redirect handler plays the
human's browser: it GETs the authorize URL with the identity headers a trusted proxy (127.0.0.1) would add,
reads the consent page, posts the approval with the CSRF cookie and token, and hands the ``Location``'s
code, state and iss to the callback handler. Then:

- the first ``/mcp`` request gets the 401 challenge, the SDK discovers the documents, registers, is
  authorized and lists the tools with its access token (claims: the human, the registered client);
- once the access token has expired, the SDK refreshes by itself (the refresh token rotates) and goes on
  without another authorization;
- gunicorn restarts (same state directory): the access token issued before still verifies, and the refresh
  token issued before still refreshes (the signing key and grants are in the state store);
- replaying a rotated refresh token revokes the whole family; revocation ends a fresh family.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn

TTL = 45   # seconds an access token lives: longer than a restart, short enough to wait for
HUMAN = {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "ops,dev"}
CALLBACK = "http://127.0.0.1:33418/callback"


@dataclass
class Server:
    base: str
    env: dict[str, str]
    log: Path
    proc: Any = None

    def start(self) -> None:
        self.proc = launch_gunicorn(self.env, self.log, self.base)

    def stop(self) -> None:
        stop_gunicorn(self.proc, self.log)

    @property
    def mcp(self) -> str:
        return self.base + "/mcp"


@pytest.fixture(scope="module")
def server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("gunicorn-mcp-oauth")
    port = free_port()
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="1",
                       SERVICE_DATA_DIR=str(tmp / "state"), SERVICE_AUTH_MODE="headers",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1/32", SERVICE_AUTH_HEADERS_SUBJECT="X-Forwarded-User",
                       SERVICE_AUTH_HEADERS_GROUPS="X-Forwarded-Groups", SERVICE_MCP_ACCESS_TOKEN_TTL=f"{TTL}s")
    running = Server(f"http://127.0.0.1:{port}", env, tmp / "server.log")
    running.start()
    yield running
    running.stop()


@dataclass
class Storage:
    """The SDK's TokenStorage, in memory, recording every token set it is given."""

    tokens: Any = None
    client_info: Any = None
    history: list[Any] = field(default_factory=list)

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


@dataclass
class Browser:
    """The human at the consent page: approves, and keeps what the redirect carried."""

    authorize_urls: list[str] = field(default_factory=list)
    result: dict[str, str] = field(default_factory=dict)

    async def redirect_handler(self, url: str) -> None:
        self.authorize_urls.append(url)
        async with httpx.AsyncClient(timeout=10, headers=HUMAN) as http:
            page = await http.get(url)
            assert page.status_code == 200, page.text[:500]
            assert page.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
            assert "Self-reported identity" in page.text   # a dynamically registered client
            fields = {name: html.unescape(value) for name, value in
                      re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)}
            action = re.search(r'<form method="post" action="([^"]+)"', page.text)
            assert action is not None and "csrf_token" in fields
            answer = await http.post(urlsplit(url)._replace(path=action.group(1), query="").geturl(),
                                     data={**fields, "decision": "approve"})
            assert answer.status_code == 302, answer.text[:500]
            location = answer.headers["Location"]
            assert location.startswith(CALLBACK + "?")
            self.result = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}

    async def callback_handler(self) -> Any:
        from mcp.client.auth import AuthorizationCodeResult

        return AuthorizationCodeResult(code=self.result["code"], state=self.result.get("state"),
                                       iss=self.result.get("iss"))


def _provider(server: Server, storage: Storage, browser: Browser) -> Any:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(client_name="shoal-test-agent", redirect_uris=[CALLBACK],  # type: ignore[list-item]
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    return OAuthClientProvider(server.mcp, metadata, storage, browser.redirect_handler, browser.callback_handler)


def _list_tools(server: Server, provider: Any) -> set[str]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> set[str]:
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http, \
                Client(streamable_http_client(server.mcp, http_client=http)) as client:
            listing = await client.list_tools()
            return {tool.name for tool in listing.tools}
    result: set[str] = asyncio.run(asyncio.wait_for(session(), 60))
    return result


def _claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return claims


def _bearer_post(server: Server, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}}
    return httpx.post(server.mcp, json=body, headers=headers, timeout=10)


def _refresh(server: Server, refresh_token: str, client_id: str) -> httpx.Response:
    return httpx.post(server.base + "/oauth/token", timeout=10, data={
        "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id,
        "resource": server.mcp})


def test_unauthenticated_mcp_gets_the_challenge(server: Server) -> None:
    response = _bearer_post(server, None)
    assert response.status_code == 401
    metadata = f"{server.base}/.well-known/oauth-protected-resource"
    assert response.headers["WWW-Authenticate"] == f'Bearer realm="mcp", resource_metadata="{metadata}"'
    bad = _bearer_post(server, "a.b.c")
    assert bad.status_code == 401
    assert bad.headers["WWW-Authenticate"].endswith(', error="invalid_token"')
    identity_only = httpx.post(server.mcp, json={}, headers=HUMAN, timeout=10)
    assert identity_only.status_code == 401   # the proxy's identity is for humans, not the agent endpoint


def test_sdk_flow_refresh_restart_and_reuse(server: Server) -> None:
    storage, browser = Storage(), Browser()
    provider = _provider(server, storage, browser)

    # 1. The first session: challenge, discovery, registration, consent, code, token, tools.
    began = time.time()
    tools = _list_tools(server, provider)
    assert "get_logs" in tools and "search" in tools
    assert len(browser.authorize_urls) == 1
    authorize = {k: v[0] for k, v in parse_qs(urlsplit(browser.authorize_urls[0]).query).items()}
    assert authorize["code_challenge_method"] == "S256" and authorize["resource"] == server.mcp
    assert browser.result["iss"] == server.base
    client_id = storage.client_info.client_id
    first = storage.tokens
    claims = _claims(first.access_token)
    assert claims["sub"] == "alice" and claims["groups"] == ["ops", "dev"]
    assert claims["iss"] == server.base and claims["aud"] == server.mcp and claims["client_id"] == client_id
    assert first.expires_in == TTL and first.refresh_token

    # 2. A restart keeps the agent logged in: the access token issued before still verifies...
    server.stop()
    server.start()
    assert time.time() - began < TTL - 1, "the restart took too long for the access token check"
    after_restart = _bearer_post(server, first.access_token)
    assert after_restart.status_code == 200, after_restart.text[:300]
    assert "supportedVersions" in after_restart.text

    # 3. ...and once it has expired, the SDK refreshes it by itself with the refresh token issued before
    # the restart (no second authorization); the refresh token rotates.
    time.sleep(max(0.0, began + TTL + 1.5 - time.time()))
    assert _bearer_post(server, first.access_token).status_code == 401   # expired now
    assert "get_logs" in _list_tools(server, provider)
    assert len(browser.authorize_urls) == 1
    second = storage.tokens
    assert second.refresh_token != first.refresh_token and second.access_token != first.access_token
    assert _bearer_post(server, second.access_token).status_code == 200

    # 4. Replaying the rotated refresh token revokes the family: the current one is dead too.
    replay = _refresh(server, first.refresh_token, client_id)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert replay.headers["Cache-Control"] == "no-store"
    current = _refresh(server, second.refresh_token, client_id)
    assert current.status_code == 400 and current.json()["error"] == "invalid_grant"


def test_revocation_ends_a_family(server: Server) -> None:
    storage, browser = Storage(), Browser()
    assert "search" in _list_tools(server, _provider(server, storage, browser))
    tokens, client_id = storage.tokens, storage.client_info.client_id
    revoked = httpx.post(server.base + "/oauth/revoke", data={"token": tokens.refresh_token}, timeout=10)
    assert revoked.status_code == 200
    refused = _refresh(server, tokens.refresh_token, client_id)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert _bearer_post(server, tokens.access_token).status_code == 200   # access tokens live until exp
