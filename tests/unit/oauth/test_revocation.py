"""``/oauth/revoke``: always 200 for a token, a refresh token ends its family, access tokens live on."""

from __future__ import annotations

import pytest
from flask import Flask

from tests.unit.oauth.test_authorize_support import make_app, oauth, refresh, tokens


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app()


def test_revoking_a_refresh_token_ends_its_family(app: Flask) -> None:
    client = app.test_client()
    first = tokens(client)
    rotated = refresh(client, first["refresh_token"]).get_json()
    response = client.post("/oauth/revoke", data={"token": first["refresh_token"]})   # an older member
    assert response.status_code == 200 and response.get_data() == b""
    assert response.headers["Cache-Control"] == "no-store"
    after = refresh(client, rotated["refresh_token"])
    assert after.status_code == 400 and after.get_json()["error"] == "invalid_grant"


def test_revoking_the_current_token(app: Flask) -> None:
    client = app.test_client()
    body = tokens(client)
    assert client.post("/oauth/revoke", data={"token": body["refresh_token"],
                                              "token_type_hint": "refresh_token"}).status_code == 200
    assert refresh(client, body["refresh_token"]).get_json()["error"] == "invalid_grant"


def test_other_families_are_untouched(app: Flask) -> None:
    client = app.test_client()
    kept, gone = tokens(client), tokens(client)
    client.post("/oauth/revoke", data={"token": gone["refresh_token"]})
    assert refresh(client, kept["refresh_token"]).status_code == 200


@pytest.mark.parametrize("token", ["unknown-token", "a.b.c", "x" * 500])
def test_unknown_tokens_get_200(app: Flask, token: str) -> None:
    response = app.test_client().post("/oauth/revoke", data={"token": token})
    assert response.status_code == 200


def test_access_tokens_live_until_exp(app: Flask) -> None:
    client = app.test_client()
    body = tokens(client)
    assert client.post("/oauth/revoke", data={"token": body["access_token"]}).status_code == 200
    assert oauth(app).access_tokens().verify(body["access_token"]).subject == "alice"
    assert refresh(client, body["refresh_token"]).status_code == 200   # the access token's revoke touched nothing


def test_unreadable_requests(app: Flask) -> None:
    client = app.test_client()
    missing = client.post("/oauth/revoke", data={})
    assert missing.status_code == 400 and missing.get_json()["error"] == "invalid_request"
    assert client.post("/oauth/revoke", json={"token": "x"}).status_code == 400
