"""CSRF (app/http/csrf.py, docs/dashboard-actions.md): an unsafe request riding on a browser's cookie session
must come from this service's origin (or a listed CORS origin, or say Sec-Fetch-Site: same-origin), else 403
AUT005 before anything runs; requests without cookies, with Authorization, or safe methods are unaffected."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Response
from flask.testing import FlaskClient

from app.auth.identity import Identity
from app.auth.oidc_claims import identity_to_dict
from app.auth.oidc_cookies import SESSION
from app.errors import REGISTRY
from app.http.auth import provider_of
from app.http.cors import CorsPolicy
from app.http.csrf import carries_cookie_session, origin_allowed, public_origin
from tests.fakes import FakeEngine
from tests.unit.objects import SVC_WEB, TASK_WEB_1, cluster
from tests.unit.support import Harness, build_harness

PUBLIC = "https://shoal.example.org"
OIDC = {"auth_mode": "oidc", "oidc_issuer": "https://idp.example", "oidc_client_id": "shoal",
        "oidc_client_secret": "secret", "oidc_redirect_url": f"{PUBLIC}/auth/callback",
        "oidc_session_key": "k" * 32, "operations_level": 3}
WRITE = f"/services/{SVC_WEB}/scale?dryRun=true"   # a dry run: every check of the write, nothing sent
SCALE = {"replicas": 3}


def _start(**settings: Any) -> Harness:
    harness = build_harness(FakeEngine(cluster()), **settings)
    harness.start()
    return harness


@pytest.fixture
def oidc() -> Iterator[tuple[FlaskClient, str]]:
    harness = _start(**OIDC)
    provider: Any = provider_of(harness.app)
    identity = Identity("u1", "User One", "oidc")
    session = provider.cookies.seal(SESSION, {**identity_to_dict(identity), "sid": "s1"}, time.time() + 600)
    client = harness.app.test_client()
    client.set_cookie(provider.cookies.names[SESSION], session)
    yield client, session
    harness.stop()


def _code(response: Any) -> str | None:
    body = response.get_json(silent=True)
    return body.get("code") if isinstance(body, dict) else None


def test_a_cross_origin_write_with_the_session_cookie_is_refused(oidc: tuple[FlaskClient, str]) -> None:
    client, _ = oidc
    for headers in ({"Origin": "https://evil.example"}, {},                       # foreign, or no origin at all
                    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "null"}, {"Origin": "http://localhost.evil.example"}):
        for method in ("delete", "post", "put", "patch"):
            response = getattr(client, method)(WRITE, json=SCALE, headers={"Accept": "application/json", **headers})
            assert response.status_code == 403, (method, headers, response.get_data(as_text=True))
            assert _code(response) == "AUT005"
            assert response.mimetype == "application/problem+json"


def test_a_same_origin_write_with_the_session_cookie_passes(oidc: tuple[FlaskClient, str]) -> None:
    client, _ = oidc
    for headers in ({"Origin": "http://localhost"}, {"Origin": "http://localhost:80"},
                    {"Sec-Fetch-Site": "same-origin"}, {"Origin": PUBLIC}):   # the public origin behind a proxy
        response = client.put(WRITE, json=SCALE, headers={"Accept": "application/json", **headers})
        assert response.status_code == 200, (headers, response.get_data(as_text=True))
        assert response.get_json()["@type"] == "WriteDryRun"   # the write ran as the session's user


def test_requests_without_the_cookie_or_with_authorization_or_safe_methods_are_unaffected(
        oidc: tuple[FlaskClient, str]) -> None:
    client, _ = oidc
    evil = {"Accept": "application/json", "Origin": "https://evil.example"}
    assert _code(client.get(f"/tasks/{TASK_WEB_1}", headers=evil)) is None   # a read with the cookie
    bearer = client.put(WRITE, json=SCALE, headers={**evil, "Authorization": "Bearer not-a-token"})
    assert _code(bearer) == "AUT001"   # the header authenticates (and fails): the cookie plays no part
    client.delete_cookie("shoal-session")
    anonymous = client.put(WRITE, json=SCALE, headers=evil)
    assert anonymous.status_code == 401 and _code(anonymous) == "AUT001"   # no cookie: authentication decides


def test_a_listed_cors_origin_may_write_but_a_wildcard_names_none() -> None:
    harness = _start(**OIDC, cors_origins=("https://ops.example",), cors_credentials=True)
    try:
        provider: Any = provider_of(harness.app)
        session = provider.cookies.seal(SESSION, identity_to_dict(Identity("u1", "U", "oidc")), time.time() + 60)
        client = harness.app.test_client()
        client.set_cookie("shoal-session", session)
        listed = client.put(WRITE, json=SCALE, headers={"Accept": "application/json", "Origin": "https://ops.example"})
        assert listed.status_code == 200, listed.get_data(as_text=True)
        other = client.put(WRITE, json=SCALE, headers={"Accept": "application/json", "Origin": "https://other.example"})
        assert _code(other) == "AUT005"
    finally:
        harness.stop()
    assert not origin_allowed("https://any.example", None, "localhost", None, CorsPolicy(("*",), True))


def test_headers_mode_treats_any_cookie_as_the_proxys_session() -> None:
    harness = _start(auth_mode="headers", headers_subject="X-User", trusted_proxies=("127.0.0.1/32",),
                     operations_level=3)
    try:
        client = harness.app.test_client()
        evil = {"Accept": "application/json", "Origin": "https://evil.example", "X-User": "alice"}
        assert client.put(WRITE, json=SCALE, headers=evil).status_code == 200           # no cookie: an API client
        client.set_cookie("shoal_oauth_csrf", "n" * 40)                          # the consent nonce is no session
        assert client.put(WRITE, json=SCALE, headers=evil).status_code == 200
        client.set_cookie("_oauth2_proxy", "opaque")                            # the proxy's session cookie
        assert _code(client.put(WRITE, json=SCALE, headers=evil)) == "AUT005"
        same = client.put(WRITE, json=SCALE, headers={**evil, "Origin": "http://localhost"})
        assert same.status_code == 200, same.get_data(as_text=True)
    finally:
        harness.stop()


def test_modes_without_cookie_sessions_are_not_checked() -> None:
    harness = _start(operations_level=3)   # auth.mode none
    try:
        client = harness.app.test_client()
        client.set_cookie("anything", "x")
        response = client.put(WRITE, json=SCALE, headers={"Accept": "application/json", "Origin": "https://evil.example"})
        assert response.status_code == 200
    finally:
        harness.stop()
    assert not carries_cookie_session("cert", frozenset(), {"a": "b"})
    assert carries_cookie_session("oidc", frozenset({"shoal-session"}), {"shoal-session": "v"})
    assert not carries_cookie_session("oidc", frozenset({"shoal-session"}), {"other": "v"})


def test_the_session_cookie_is_samesite_lax_and_the_code_is_registered(oidc: tuple[FlaskClient, str]) -> None:
    client, session = oidc
    provider: Any = provider_of(client.application)
    response = Response()
    provider.cookies.set(response, SESSION, session, 60)
    header = response.headers["Set-Cookie"]
    assert "SameSite=Lax" in header and "HttpOnly" in header
    assert REGISTRY["AUT005"].status == 403
    assert public_origin(f"{PUBLIC}/auth/callback") == PUBLIC and public_origin(None) is None
