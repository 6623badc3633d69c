"""The bearer check of ``/mcp`` (``authenticate_agent``): valid tokens, each way a token is refused, the
challenge that starts the agent's OAuth flow, mode none and the bypass modes."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from flask import Flask

from app.auth.identity import AuthenticationFailed
from app.oauth.bearer import authenticate_agent
from app.oauth.caller import AgentCaller
from app.oauth.tokens import AccessTokens
from tests.unit.oauth.test_authorize_support import CLIENT, ISSUER, RESOURCE, make_app, oauth, tokens

CHALLENGE = f'Bearer realm="mcp", resource_metadata="{ISSUER}/.well-known/oauth-protected-resource"'
INVALID = CHALLENGE + ', error="invalid_token"'


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app()


def _call(app: Flask, headers: dict[str, str]) -> AgentCaller:
    from flask import request

    with app.test_request_context("/mcp", method="POST", headers=headers, environ_base={"REMOTE_ADDR": "127.0.0.1"}):
        return authenticate_agent(request)


def _refused(app: Flask, headers: dict[str, str]) -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as caught:
        _call(app, headers)
    return caught.value


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_valid_token_gives_the_identity_and_client(app: Flask) -> None:
    body = tokens(app.test_client())
    caller = _call(app, _bearer(body["access_token"]))
    assert caller.client_id == CLIENT.client_id
    identity = caller.identity
    assert identity.subject == "alice" and identity.display_name == "alice"
    assert identity.provider == "oauth" and identity.groups == ("ops", "dev") and not identity.anonymous


def test_no_token_gets_the_challenge_with_resource_metadata(app: Flask) -> None:
    failure = _refused(app, {})
    assert failure.challenge == CHALLENGE


def test_identity_headers_alone_are_not_enough(app: Flask) -> None:
    assert _refused(app, {"X-User": "alice"}).challenge == CHALLENGE


def _key(app: Flask) -> bytes:
    return oauth(app).key()


@pytest.mark.parametrize("make", [
    pytest.param(lambda key: AccessTokens(key, ISSUER, RESOURCE, 60, clock=lambda: 1_000_000).issue(
        "alice", (), "c"), id="expired"),
    pytest.param(lambda key: AccessTokens(key, ISSUER, "https://other.example/mcp", 60).issue("alice", (), "c"),
                 id="wrong-aud"),
    pytest.param(lambda key: AccessTokens(key, "https://other.example", RESOURCE, 60).issue("alice", (), "c"),
                 id="wrong-iss"),
    pytest.param(lambda key: AccessTokens(b"w" * 32, ISSUER, RESOURCE, 60).issue("alice", (), "c"), id="wrong-key"),
    pytest.param(lambda key: AccessTokens(key, ISSUER, RESOURCE, 60, clock=lambda: 4_000_000_000).issue(
        "alice", (), "c"), id="iat-in-the-future"),
    pytest.param(lambda key: "not-a-jwt", id="garbage"),
    pytest.param(lambda key: "a.b.c", id="unreadable"),
])
def test_refused_tokens(app: Flask, make: Any) -> None:
    failure = _refused(app, _bearer(make(_key(app))))
    assert failure.challenge == INVALID
    assert "not accepted" in failure.detail


def _unsigned(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def test_alg_none_and_tampering_are_refused(app: Flask) -> None:
    body = tokens(app.test_client())
    header, payload, signature = body["access_token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert _refused(app, _bearer(_unsigned(claims))).challenge == INVALID
    claims["sub"] = "root"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert _refused(app, _bearer(f"{header}.{forged}.{signature}")).challenge == INVALID


@pytest.mark.parametrize("value", ["Basic YWxpY2U6cHc=", "Bearer", "Bearer ", "Token abc"])
def test_other_schemes_are_refused(app: Flask, value: str) -> None:
    assert _refused(app, {"Authorization": value}).challenge == INVALID


def test_a_refresh_token_is_not_a_bearer_token(app: Flask) -> None:
    body = tokens(app.test_client())
    assert _refused(app, _bearer(body["refresh_token"])).challenge == INVALID


def test_mode_none_is_anonymous() -> None:
    app = make_app(auth_mode="none")
    caller = _call(app, {})
    assert caller.identity.anonymous and caller.client_id is None


def test_bypass_mode_accepts_its_identity_without_a_token() -> None:
    app = make_app(mcp_auth_bypass=("headers",))
    caller = _call(app, {"X-User": "bob", "X-Groups": "ops"})
    assert caller.identity.subject == "bob" and caller.identity.provider == "headers" and caller.client_id is None
    failure = _refused(app, {})   # no identity from the mode either: the agent may still use OAuth
    assert failure.challenge == CHALLENGE
    body = tokens(app.test_client())
    assert _call(app, _bearer(body["access_token"])).identity.provider == "oauth"


def test_tokens_of_another_issuer_configuration_are_refused() -> None:
    ours = make_app(mcp_signing_key=b"s" * 32)
    theirs = make_app(mcp_signing_key=b"s" * 32, mcp_issuer="https://elsewhere.example")
    token = oauth(theirs).access_tokens().issue("alice", (), CLIENT.client_id)   # same key, other iss and aud
    assert oauth(theirs).access_tokens().verify(token).subject == "alice"
    assert _refused(ours, _bearer(token)).challenge == INVALID


def test_challenge_follows_the_base_path() -> None:
    app = make_app(base_path="/shoal")
    failure = _refused(app, {})
    assert failure.challenge == ('Bearer realm="mcp", resource_metadata='
                                 f'"{ISSUER}/shoal/.well-known/oauth-protected-resource"')
