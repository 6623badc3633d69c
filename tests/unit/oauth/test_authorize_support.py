"""Helpers of the authorization server's unit tests (no tests here): an app in auth mode headers with the
agent endpoint on, a fake client registry, and the steps of the authorization-code flow."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from flask import Flask
from flask.testing import FlaskClient

from app import create_app
from app.config import Settings
from app.oauth.clients import OAuthClient, UnknownClient
from app.oauth.server import OAuthServer, maybe_server, server_of

ISSUER = "https://shoal.example"
RESOURCE = ISSUER + "/mcp"
REDIRECT = "http://127.0.0.1:5555/callback"
CLIENT = OAuthClient("client-1", "Test Agent", (REDIRECT, "http://127.0.0.1:5555/other?keep=1"), verified=False)
VERIFIED = OAuthClient("https://agent.example/meta.json", "Verified Agent", ("https://agent.example/cb",),
                       verified=True)
CODE_ONLY = OAuthClient("client-2", "No Refresh", (REDIRECT,), verified=False, grant_types=("authorization_code",))
REFRESH_ONLY = OAuthClient("client-3", "Odd", (REDIRECT,), verified=False, grant_types=("refresh_token",))
USER = {"X-User": "alice", "X-Groups": "ops,dev"}


class FakeRegistry:
    def __init__(self, *clients: OAuthClient) -> None:
        self.clients = {client.client_id: client for client in clients}

    def lookup(self, client_id: str) -> OAuthClient:
        try:
            return self.clients[client_id]
        except KeyError:
            raise UnknownClient(f"no client {client_id!r} is registered") from None


def make_app(**overrides: Any) -> Flask:
    values: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User", "headers_groups": "X-Groups",
                              "trusted_proxies": ("127.0.0.1/32",), "mcp_enabled": True, "mcp_issuer": ISSUER,
                              "data_dir": ":memory:", **overrides}
    app = create_app(Settings(**values), configure_logging=False)
    server = maybe_server(app)
    if server is not None:   # auth mode none has no authorization server
        server.registry = FakeRegistry(CLIENT, VERIFIED, CODE_ONLY, REFRESH_ONLY)
    return app


def oauth(app: Flask) -> OAuthServer:
    return server_of(app)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)[:100]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_params(challenge: str, **overrides: str | None) -> dict[str, str]:
    params: dict[str, str | None] = {"response_type": "code", "client_id": CLIENT.client_id, "redirect_uri": REDIRECT,
                                     "code_challenge": challenge, "code_challenge_method": "S256",
                                     "state": "state-123", "resource": RESOURCE, **overrides}
    return {k: v for k, v in params.items() if v is not None}


def location_params(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def hidden_fields(page: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in
            re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)}


def consent(client: FlaskClient, params: Mapping[str, str], headers: Mapping[str, str] = USER) -> dict[str, str]:
    """GET the consent page; its form's hidden fields (the CSRF token included)."""
    response = client.get("/oauth/authorize", query_string=dict(params), headers=dict(headers))
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return hidden_fields(response.get_data(as_text=True))


def approve(client: FlaskClient, fields: Mapping[str, str], decision: str = "approve",
            headers: Mapping[str, str] = USER) -> Any:
    return client.post("/oauth/authorize", data={**fields, "decision": decision}, headers=dict(headers))


def obtain_code(client: FlaskClient, challenge: str, **overrides: str | None) -> str:
    response = approve(client, consent(client, authorize_params(challenge, **overrides)))
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    return location_params(response.headers["Location"])["code"]


def exchange(client: FlaskClient, code: str, verifier: str, /, **overrides: str | None) -> Any:
    form: dict[str, str | None] = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                                   "client_id": CLIENT.client_id, "code_verifier": verifier, "resource": RESOURCE,
                                   **overrides}
    return client.post("/oauth/token", data={k: v for k, v in form.items() if v is not None})


def refresh(client: FlaskClient, token: str, /, **overrides: str | None) -> Any:
    form: dict[str, str | None] = {"grant_type": "refresh_token", "refresh_token": token,
                                   "client_id": CLIENT.client_id, "resource": RESOURCE, **overrides}
    return client.post("/oauth/token", data={k: v for k, v in form.items() if v is not None})


def tokens(client: FlaskClient) -> dict[str, Any]:
    """A full authorization: the token response's JSON."""
    verifier, challenge = pkce()
    response = exchange(client, obtain_code(client, challenge), verifier)
    assert response.status_code == 200, response.get_json()
    body: dict[str, Any] = response.get_json()
    return body
