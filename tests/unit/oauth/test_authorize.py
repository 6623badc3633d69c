"""``/oauth/authorize``: every error branch (page or redirect), the consent page and its headers, the
decisions, and authorization codes (single use, expiry)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.oauth.codes import CodeStore
from tests.unit.oauth.test_authorize_support import (
    CLIENT,
    ISSUER,
    REDIRECT,
    REFRESH_ONLY,
    RESOURCE,
    USER,
    VERIFIED,
    approve,
    authorize_params,
    consent,
    exchange,
    location_params,
    make_app,
    oauth,
    obtain_code,
    pkce,
)


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app()


def _get(app: Flask, params: dict[str, str], headers: dict[str, str] = USER) -> Any:
    return app.test_client().get("/oauth/authorize", query_string=params, headers=headers)


# ------------------------------------------------------------------ errors shown as a page (never redirected)
@pytest.mark.parametrize(("overrides", "message"), [
    ({"client_id": None}, "client_id is missing"),
    ({"client_id": "nobody"}, "Unknown client"),
    ({"redirect_uri": None}, "no redirect_uri"),
    ({"redirect_uri": REDIRECT + "/"}, "not one this client registered"),
    ({"redirect_uri": "https://evil.example/cb"}, "not one this client registered"),
    ({"redirect_uri": REDIRECT.upper()}, "not one this client registered"),
    ({"state": "x" * 1025}, "longer than 1024"),
])
def test_client_and_redirect_errors_are_a_page(app: Flask, overrides: dict[str, str | None], message: str) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge, **overrides))
    assert response.status_code == 400
    assert "Location" not in response.headers
    assert response.mimetype == "text/html"
    assert message in response.get_data(as_text=True)


def test_a_repeated_parameter_is_a_page(app: Flask) -> None:
    _, challenge = pkce()
    query = "&".join(f"{k}={v}" for k, v in authorize_params(challenge).items()) + "&client_id=other"
    response = app.test_client().get("/oauth/authorize?" + query, headers=USER)
    assert response.status_code == 400
    assert "Location" not in response.headers


# ------------------------------------------------------------------ errors redirected back with error, state, iss
@pytest.mark.parametrize(("overrides", "error"), [
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"response_type": None}, "unsupported_response_type"),
    ({"code_challenge": None}, "invalid_request"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge_method": None}, "invalid_request"),
    ({"code_challenge": "too-short"}, "invalid_request"),
    ({"resource": None}, "invalid_request"),
    ({"resource": "https://shoal.example/other"}, "invalid_target"),
    ({"resource": RESOURCE + "/"}, "invalid_target"),
    ({"resource": "https://evil.example/mcp"}, "invalid_target"),
])
def test_request_errors_redirect_back(app: Flask, overrides: dict[str, str | None], error: str) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge, **overrides))
    assert response.status_code == 302
    location = response.headers["Location"]
    assert location.startswith(REDIRECT + "?")
    params = location_params(location)
    assert params["error"] == error
    assert params["state"] == "state-123"
    assert params["iss"] == ISSUER
    assert "code" not in params


def test_a_client_without_the_code_grant_is_refused(app: Flask) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge, client_id=REFRESH_ONLY.client_id))
    assert response.status_code == 302
    assert location_params(response.headers["Location"])["error"] == "unauthorized_client"


def test_resource_may_be_omitted_when_not_required() -> None:
    app = make_app(mcp_require_resource_indicator=False)
    _, challenge = pkce()
    fields = consent(app.test_client(), authorize_params(challenge, resource=None))
    assert fields["resource"] == RESOURCE


def test_the_human_must_be_authenticated(app: Flask) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge), headers={})
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert "csrf_token" not in response.get_data(as_text=True)


# ------------------------------------------------------------------ the consent page
def test_consent_page_shows_who_and_where(app: Flask) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge))
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "Test Agent" in page
    assert "Self-reported identity" in page and "Verified via published metadata" not in page
    assert "127.0.0.1:5555" in page
    assert "alice" in page
    assert 'value="approve"' in page and 'value="deny"' in page


def test_verified_client_badge(app: Flask) -> None:
    _, challenge = pkce()
    page = _get(app, authorize_params(challenge, client_id=VERIFIED.client_id,
                                      redirect_uri=VERIFIED.redirect_uris[0])).get_data(as_text=True)
    assert "Verified via published metadata" in page and "Self-reported identity" not in page


def test_consent_page_headers(app: Flask) -> None:
    _, challenge = pkce()
    response = _get(app, authorize_params(challenge))
    csp = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "form-action 'self' https: http://127.0.0.1:*" in csp   # the approval redirects to the client
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/oauth/" in cookie


def test_consent_cookie_path_follows_the_base_path() -> None:
    app = make_app(base_path="/shoal")
    _, challenge = pkce()
    response = app.test_client().get("/shoal/oauth/authorize", query_string=authorize_params(
        challenge, resource="https://shoal.example/shoal/mcp"), headers=USER)
    assert response.status_code == 200
    assert "Path=/shoal/oauth/" in response.headers["Set-Cookie"]
    assert 'action="/shoal/oauth/authorize"' in response.get_data(as_text=True)


# ------------------------------------------------------------------ decisions and codes
def test_deny_redirects_access_denied(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    response = approve(client, consent(client, authorize_params(challenge)), decision="deny")
    assert response.status_code == 302
    params = location_params(response.headers["Location"])
    assert params["error"] == "access_denied"
    assert params["state"] == "state-123" and params["iss"] == ISSUER
    assert "code" not in params


def test_approve_redirects_with_code_state_iss(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    response = approve(client, consent(client, authorize_params(challenge)))
    assert response.status_code == 302
    params = location_params(response.headers["Location"])
    assert set(params) == {"code", "state", "iss"}
    assert params["state"] == "state-123" and params["iss"] == ISSUER
    assert len(params["code"]) >= 32


def test_redirect_keeps_the_registered_query(app: Flask) -> None:
    client = app.test_client()
    _, challenge = pkce()
    other = CLIENT.redirect_uris[1]
    response = approve(client, consent(client, authorize_params(challenge, redirect_uri=other)))
    location = response.headers["Location"]
    assert location.startswith("http://127.0.0.1:5555/other?keep=1&")
    assert "code" in location_params(location)


def test_code_is_single_use(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge)
    assert exchange(client, code, verifier).status_code == 200
    second = exchange(client, code, verifier)
    assert second.status_code == 400
    assert second.get_json()["error"] == "invalid_grant"


def test_code_expires_after_60_seconds(app: Flask) -> None:
    now = [1000.0]
    codes = CodeStore(clock=lambda: now[0])
    code = codes.issue("c", REDIRECT, "x" * 43, RESOURCE, "alice", ())
    now[0] += 60.5
    assert codes.redeem(code) is None
    fresh = codes.issue("c", REDIRECT, "x" * 43, RESOURCE, "alice", ())
    now[0] += 59
    grant = codes.redeem(fresh)
    assert grant is not None and grant.subject == "alice"


def test_code_expiry_through_the_token_endpoint() -> None:
    app = make_app()
    now = [5000.0]
    oauth(app).codes = CodeStore(clock=lambda: now[0])
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge)
    now[0] += 61
    response = exchange(client, code, verifier)
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_grant"


def test_code_binds_identity(app: Flask) -> None:
    client = app.test_client()
    verifier, challenge = pkce()
    code = obtain_code(client, challenge)
    token = exchange(client, code, verifier).get_json()["access_token"]
    claims = oauth(app).access_tokens().verify(token)
    assert claims.subject == "alice" and claims.groups == ("ops", "dev") and claims.client_id == CLIENT.client_id


def test_code_store_is_bounded() -> None:
    codes = CodeStore(max_codes=3)
    issued = [codes.issue("c", REDIRECT, "x" * 43, RESOURCE, "s", ()) for _ in range(5)]
    assert codes.redeem(issued[0]) is None and codes.redeem(issued[1]) is None
    assert codes.redeem(issued[4]) is not None
