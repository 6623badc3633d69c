"""``/oauth/token``: the code exchange (claims, headers, every error), refresh rotation and reuse detection,
and the grant stores (SQLite and memory) the endpoint relies on."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app.oauth.tokens import AccessTokens, hash_token
from app.store.oauth_grants import MemoryGrants, RefreshRecord, Rotation, SqliteGrants
from tests.unit.oauth.test_authorize_support import (
    CLIENT,
    CODE_ONLY,
    ISSUER,
    REDIRECT,
    RESOURCE,
    exchange,
    make_app,
    oauth,
    obtain_code,
    pkce,
    refresh,
    tokens,
)


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app(mcp_access_token_ttl=600.0)


def _segment(token: str, index: int) -> dict[str, Any]:
    part = token.split(".")[index]
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return value


def test_code_exchange_issues_the_documented_tokens(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    response = exchange(client, obtain_code(client, challenge), verifier)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store" and response.headers["Pragma"] == "no-cache"
    body = response.get_json()
    assert set(body) == {"access_token", "token_type", "expires_in", "refresh_token"}
    assert body["token_type"] == "Bearer" and body["expires_in"] == 600
    assert _segment(body["access_token"], 0) == {"alg": "HS256", "typ": "JWT"}
    claims = _segment(body["access_token"], 1)
    assert set(claims) == {"sub", "groups", "iss", "aud", "exp", "iat", "jti", "client_id"}
    assert claims["sub"] == "alice" and claims["groups"] == ["ops", "dev"]
    assert claims["iss"] == ISSUER and claims["aud"] == RESOURCE and claims["client_id"] == CLIENT.client_id
    assert claims["exp"] - claims["iat"] == 600
    assert body["refresh_token"].count(".") == 0 and len(body["refresh_token"]) >= 40


def test_refresh_tokens_are_stored_hashed(app: Flask) -> None:
    body = tokens(app.test_client())
    grants = oauth(app).grants()
    assert isinstance(grants, MemoryGrants)
    assert grants.get(hash_token(body["refresh_token"])) is not None
    assert body["refresh_token"] not in grants._tokens


@pytest.mark.parametrize(("overrides", "status", "error"), [
    ({"grant_type": None}, 400, "invalid_request"),
    ({"grant_type": "password"}, 400, "unsupported_grant_type"),
    ({"grant_type": "client_credentials"}, 400, "unsupported_grant_type"),
    ({"code": None}, 400, "invalid_request"),
    ({"redirect_uri": None}, 400, "invalid_request"),
    ({"client_id": None}, 400, "invalid_request"),
    ({"code_verifier": None}, 400, "invalid_request"),
    ({"code_verifier": "short"}, 400, "invalid_request"),
    ({"code_verifier": "a" * 129}, 400, "invalid_request"),
    ({"code_verifier": "a" * 42 + "!"}, 400, "invalid_request"),
    ({"code_verifier": "b" * 64}, 400, "invalid_grant"),          # well formed, wrong
    ({"code": "no-such-code"}, 400, "invalid_grant"),
    ({"redirect_uri": CLIENT.redirect_uris[1]}, 400, "invalid_grant"),
    ({"client_id": "someone-else"}, 400, "invalid_grant"),
    ({"resource": None}, 400, "invalid_request"),
    ({"resource": "https://evil.example/mcp"}, 400, "invalid_target"),
])
def test_code_exchange_errors(app: Flask, overrides: dict[str, str | None], status: int, error: str) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    response = exchange(client, obtain_code(client, challenge), verifier, **overrides)
    assert response.status_code == status
    body = response.get_json()
    assert set(body) == {"error", "error_description"} and body["error"] == error
    assert response.headers["Cache-Control"] == "no-store"


def test_a_failed_exchange_burns_the_code(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge)
    assert exchange(client, code, "b" * 64).get_json()["error"] == "invalid_grant"
    assert exchange(client, code, verifier).get_json()["error"] == "invalid_grant"


def test_form_rules(app: Flask) -> None:
    client = app.test_client()
    too_big = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x" * 9000})
    assert too_big.status_code == 413 and too_big.get_json()["error"] == "invalid_request"
    as_json = client.post("/oauth/token", json={"grant_type": "refresh_token", "refresh_token": "x"})
    assert as_json.status_code == 400 and as_json.get_json()["error"] == "invalid_request"
    repeated = client.post("/oauth/token", data="grant_type=refresh_token&refresh_token=a&refresh_token=b",
                           content_type="application/x-www-form-urlencoded")
    assert repeated.status_code == 400 and "repeated" in repeated.get_json()["error_description"]
    assert client.get("/oauth/token").status_code == 405


def test_refresh_rotates(app: Flask) -> None:
    client = app.test_client()
    first = tokens(client)
    second = refresh(client, first["refresh_token"])
    assert second.status_code == 200
    assert second.headers["Cache-Control"] == "no-store" and second.headers["Pragma"] == "no-cache"
    body = second.get_json()
    assert body["refresh_token"] != first["refresh_token"]
    assert body["access_token"] != first["access_token"]
    claims = oauth(app).access_tokens().verify(body["access_token"])
    assert claims.subject == "alice" and claims.groups == ("ops", "dev")
    third = refresh(client, body["refresh_token"])
    assert third.status_code == 200


def test_reuse_of_a_rotated_token_revokes_the_family(app: Flask) -> None:
    client = app.test_client()
    first = tokens(client)
    rotated = refresh(client, first["refresh_token"]).get_json()
    replay = refresh(client, first["refresh_token"])
    assert replay.status_code == 400 and replay.get_json()["error"] == "invalid_grant"
    after = refresh(client, rotated["refresh_token"])   # the legitimate successor died with its family
    assert after.status_code == 400 and after.get_json()["error"] == "invalid_grant"


def test_other_families_survive_a_replay(app: Flask) -> None:
    client = app.test_client()
    victim, other = tokens(client), tokens(client)
    refresh(client, victim["refresh_token"])
    refresh(client, victim["refresh_token"])
    assert refresh(client, other["refresh_token"]).status_code == 200


@pytest.mark.parametrize(("overrides", "error"), [
    ({"refresh_token": None}, "invalid_request"),
    ({"refresh_token": "unknown"}, "invalid_grant"),
    ({"client_id": "someone-else"}, "invalid_grant"),
    ({"resource": "https://evil.example/mcp"}, "invalid_target"),
    ({"resource": None}, "invalid_request"),
])
def test_refresh_errors(app: Flask, overrides: dict[str, str | None], error: str) -> None:
    client = app.test_client()
    body = tokens(client)
    response = refresh(client, body["refresh_token"], **overrides)
    assert response.status_code == 400 and response.get_json()["error"] == error
    if "refresh_token" not in overrides:
        assert refresh(client, body["refresh_token"]).status_code == 200   # a refused request used nothing


def test_expired_refresh_token() -> None:
    app = make_app(mcp_refresh_token_ttl=1.0)
    client = app.test_client()
    body = tokens(client)
    grants = oauth(app).grants()
    assert isinstance(grants, MemoryGrants)
    grants._clock = lambda: 10**12   # far past every expiry
    response = refresh(client, body["refresh_token"])
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_grant"


def test_a_client_without_the_refresh_grant_gets_no_refresh_token(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge, client_id=CODE_ONLY.client_id)
    response = exchange(client, code, verifier, client_id=CODE_ONLY.client_id)
    assert response.status_code == 200
    assert set(response.get_json()) == {"access_token", "token_type", "expires_in"}


def test_basic_auth_names_the_client(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge)
    basic = base64.b64encode(f"{CLIENT.client_id}:".encode()).decode()
    response = client.post("/oauth/token", headers={"Authorization": f"Basic {basic}"}, data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier,
        "resource": RESOURCE})
    assert response.status_code == 200


# ------------------------------------------------------------------ the grant stores
def _record(token_hash: str, family: str, expires: float = 2e9) -> RefreshRecord:
    return RefreshRecord(token_hash, family, "c", "alice", ("ops",), RESOURCE, 1.0, expires)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = MemoryGrants() if request.param == "memory" else SqliteGrants(str(tmp_path / "shoal.db"))
    yield made
    made.close()


def test_store_rotation_and_replay(store: Any) -> None:
    store.add(_record("h1", "f1"))
    store.add(_record("g1", "f2"))
    assert store.rotate("h1", _record("h2", "f1")) is Rotation.ROTATED
    got = store.get("h1")
    assert got is not None and got.used and got.groups == ("ops",)
    assert store.rotate("h1", _record("h3", "f1")) is Rotation.REPLAYED
    assert store.get("h2") is None and store.get("h1") is None and store.get("h3") is None
    assert store.get("g1") is not None
    assert store.rotate("nope", _record("h4", "f1")) is Rotation.UNKNOWN


def test_store_revocation_and_expiry(store: Any) -> None:
    store.add(_record("h1", "f1"))
    store.rotate("h1", _record("h2", "f1"))
    assert store.revoke_family("h2") is True
    assert store.get("h1") is None and store.get("h2") is None
    assert store.revoke_family("h2") is False
    store.add(_record("old", "f3", expires=5.0))
    assert store.get("old") is None


def test_store_key_is_made_once(store: Any) -> None:
    made: list[bytes] = []

    def make() -> bytes:
        made.append(b"k" * 32)
        return made[-1]
    assert store.signing_key(make) == b"k" * 32
    assert store.signing_key(lambda: b"z" * 32) == b"k" * 32
    assert len(made) == 1


def test_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "shoal.db")
    first = SqliteGrants(path)
    key = first.signing_key(lambda: b"s" * 32)
    first.add(_record("h1", "f1"))
    first.close()
    second = SqliteGrants(path)
    try:
        assert second.signing_key(lambda: b"other" * 8) == key
        assert second.rotate("h1", _record("h2", "f1")) is Rotation.ROTATED
    finally:
        second.close()


def test_sqlite_store_is_bounded(tmp_path: Path) -> None:
    store = SqliteGrants(str(tmp_path / "shoal.db"), max_tokens=3)
    try:
        for index in range(5):
            store.add(RefreshRecord(f"h{index}", f"f{index}", "c", "s", (), RESOURCE, float(index + 1), 2e9))
        assert store.get("h0") is None and store.get("h1") is None and store.get("h4") is not None
    finally:
        store.close()


def test_access_tokens_survive_a_new_verifier_with_the_same_key() -> None:
    issued = AccessTokens(b"q" * 32, ISSUER, RESOURCE, 60).issue("alice", ("ops",), "c")
    assert AccessTokens(b"q" * 32, ISSUER, RESOURCE, 60).verify(issued).subject == "alice"
