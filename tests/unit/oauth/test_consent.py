"""The consent form's CSRF protection: nothing is issued without the cookie and its HMAC token for this
human and this request."""

from __future__ import annotations

import pytest
from flask import Flask

from app.oauth.consent import COOKIE, csrf_token
from tests.unit.oauth.test_authorize_support import (
    REDIRECT,
    approve,
    authorize_params,
    consent,
    location_params,
    make_app,
    pkce,
)


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app()


def _refused(response: object) -> None:
    assert response.status_code == 400  # type: ignore[attr-defined]
    assert "Location" not in response.headers  # type: ignore[attr-defined]
    assert "CSRF" in response.get_data(as_text=True)  # type: ignore[attr-defined]


def test_missing_token_is_refused(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    del fields["csrf_token"]
    _refused(approve(client, fields))


def test_bad_token_is_refused(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    fields["csrf_token"] = fields["csrf_token"][:-2] + ("AA" if not fields["csrf_token"].endswith("AA") else "BB")
    _refused(approve(client, fields))


def test_missing_cookie_is_refused(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    client.delete_cookie(COOKIE, path="/oauth/")
    _refused(approve(client, fields))


def test_token_of_another_browser_is_refused(app: Flask) -> None:
    victim, attacker = app.test_client(), app.test_client()
    _, challenge = pkce()
    fields = consent(attacker, authorize_params(challenge))
    consent(victim, authorize_params(challenge))   # the victim has a cookie of its own
    _refused(approve(victim, fields))


def test_token_is_bound_to_the_human(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    _refused(approve(client, fields, headers={"X-User": "mallory"}))


def test_token_is_bound_to_the_request(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    _, other_challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    fields["code_challenge"] = other_challenge   # an attacker's challenge swapped into the form
    _refused(approve(client, fields))


def test_refused_post_issues_nothing(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    fields = consent(client, authorize_params(challenge))
    fields.pop("csrf_token")
    before = len(app.extensions["shoal.oauth"].codes._codes)
    approve(client, fields)
    assert len(app.extensions["shoal.oauth"].codes._codes) == before


def test_valid_token_is_accepted_and_cookie_reused(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    first = consent(client, authorize_params(challenge))
    second = consent(client, authorize_params(challenge))
    assert first["csrf_token"] == second["csrf_token"]   # same cookie, same request: same token
    response = approve(client, second)
    assert response.status_code == 302
    assert response.headers["Location"].startswith(REDIRECT)
    assert "code" in location_params(response.headers["Location"])


def test_csrf_token_depends_on_every_part() -> None:
    key = b"k" * 32
    base = csrf_token(key, "n" * 43, "alice", "c", REDIRECT, "x" * 43)
    assert base == csrf_token(key, "n" * 43, "alice", "c", REDIRECT, "x" * 43)
    variants = [csrf_token(b"j" * 32, "n" * 43, "alice", "c", REDIRECT, "x" * 43),
                csrf_token(key, "m" * 43, "alice", "c", REDIRECT, "x" * 43),
                csrf_token(key, "n" * 43, "bob", "c", REDIRECT, "x" * 43),
                csrf_token(key, "n" * 43, "alice", "d", REDIRECT, "x" * 43),
                csrf_token(key, "n" * 43, "alice", "c", REDIRECT + "x", "x" * 43),
                csrf_token(key, "n" * 43, "alice", "c", REDIRECT, "y" * 43)]
    assert base not in variants and len(set(variants)) == len(variants)
