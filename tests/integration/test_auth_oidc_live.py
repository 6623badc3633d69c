"""Auth mode oidc: a real gunicorn on the lab swarm against the test OpenID provider (tests/oidc_provider.py,
authlib's server pieces on 127.0.0.1).

A ``requests.Session`` plays the browser: ``/auth/login`` → the provider's authorize endpoint (which logs in
the test user without a form) → ``/auth/callback`` → the saved path, cookies kept by the session. Then:
reads with the session, ``/auth/whoami``, bearer ID tokens (valid, expired, signed by another key, for
another audience), a tampered cookie, no credentials, a browser without a session, callback failures,
logout (also of a copied cookie) and cross-origin logout. Finally the gunicorn log holds no code, token or
cookie value that went over the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, urljoin, urlsplit

import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn
from tests.oidc_provider import ACL_CLAIM, TestProvider

JSON_ACCEPT = {"Accept": "application/json"}
HTML_ACCEPT = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
SESSION_COOKIE = "shoal-session"      # no TLS here: no __Host- prefix
# engineering reads nodes by policy; alice's provider grant (claim) adds the demo stack; bob has neither.
POLICY = {"grants": [{"resources": ["node:*"], "audience": ["group:engineering"], "permissions": ["read"]}]}


@dataclass
class Oidc:
    base: str
    provider: TestProvider
    log: Path
    secrets_seen: list[str] = field(default_factory=list)   # cookie values that crossed the wire

    def login(self, user: str = "alice", redirect: str = "/services") -> tuple[requests.Session, requests.Response]:
        """The whole browser flow; returns the session and the final response (JSON of ``redirect``)."""
        self.provider.next_user = user
        session = requests.Session()
        response = browse(session, f"{self.base}/auth/login?redirect={quote(redirect)}", JSON_ACCEPT)
        value = session.cookies.get(SESSION_COOKIE)
        if value:
            self.secrets_seen.append(value)
        return session, response


def browse(session: requests.Session, url: str, headers: dict[str, str], hops: int = 6) -> requests.Response:
    """GET ``url`` following redirects one request at a time, like a browser (so that the OpenAPI check of
    conftest sees each hop under its own URL); ``history`` lists the redirects."""
    history: list[requests.Response] = []
    for _ in range(hops):
        response = session.get(url, headers=headers, timeout=10, allow_redirects=False)
        if response.status_code not in (301, 302, 303, 307, 308):
            response.history = history
            return response
        history.append(response)
        url = urljoin(url, response.headers["Location"])
    raise AssertionError(f"more than {hops} redirects: {[r.url for r in history]}")


@pytest.fixture(scope="module")
def oidc(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oidc]:
    provider = TestProvider()
    provider.start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    provider.redirect_uris.append(f"{base}/auth/callback")
    log_path = tmp_path_factory.mktemp("gunicorn-oidc") / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state-oidc")),
                       SERVICE_LOG_LEVEL="debug", SERVICE_AUTH_MODE="oidc",
                       SERVICE_AUTH_OIDC_ISSUER=provider.issuer, SERVICE_AUTH_OIDC_CLIENT_ID=provider.client_id,
                       SERVICE_AUTH_OIDC_CLIENT_SECRET=provider.client_secret,
                       SERVICE_AUTH_OIDC_REDIRECT_URL=f"{base}/auth/callback",
                       SERVICE_AUTH_OIDC_ACL_CLAIM=ACL_CLAIM, SERVICE_ACL_POLICY=json.dumps(POLICY))
    process = launch_gunicorn(env, log_path, base)
    try:
        yield Oidc(base, provider, log_path)
    finally:
        stop_gunicorn(process, log_path)
        provider.stop()


def _problem(response: requests.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text[:500]
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    assert str(body["type"]).endswith(f"/api/errors/{code}"), body
    return body


def test_browser_login_with_pkce_then_reads(oidc: Oidc) -> None:
    session, final = oidc.login("alice", "/services")
    assert final.status_code == 200, final.text[:500]
    assert final.url == f"{oidc.base}/services"
    assert [hop.status_code for hop in final.history] == [302, 302, 302]   # login, authorize, callback
    authorize = oidc.provider.authorize_requests[-1]
    assert authorize["code_challenge_method"] == "S256" and len(authorize["code_challenge"]) == 43
    assert authorize["nonce"] and authorize["state"] and authorize["scope"] == "openid profile email"
    assert authorize["redirect_uri"] == f"{oidc.base}/auth/callback"
    login_cookie = final.history[0].headers["Set-Cookie"]
    assert "shoal-login=" in login_cookie and "HttpOnly" in login_cookie and "SameSite=Lax" in login_cookie
    assert "Max-Age=300" in login_cookie
    set_session = final.history[2].headers["Set-Cookie"]
    assert f"{SESSION_COOKIE}=" in set_session and "HttpOnly" in set_session and "SameSite=Lax" in set_session
    assert "Secure" not in set_session   # plain HTTP here; __Host- + Secure under TLS (unit-tested)
    # alice's provider grant (stack:demo) narrows /services to the demo stack
    names = {item["Spec"]["Name"] for item in final.json()["items"]}
    assert names and all(name.startswith("demo_") for name in names), names

    whoami = session.get(f"{oidc.base}/auth/whoami", headers=JSON_ACCEPT, timeout=10)
    assert whoami.status_code == 200
    body = whoami.json()
    assert (body["subject"], body["email"], body["provider"]) == ("alice-0001", "alice@example.com", "oidc")
    assert body["groups"] == ["engineering", "ops"] and body["displayName"] == "Alice Example"
    assert "access_token" not in json.dumps(body) and "nonce" not in body.get("raw", {})
    profile = session.get(f"{oidc.base}/profile", headers=JSON_ACCEPT, timeout=10).json()
    assert profile["permissions"] == {"node:*": ["read"], "stack:demo": ["read"]}
    nodes = session.get(f"{oidc.base}/nodes", headers=JSON_ACCEPT, timeout=10)
    assert nodes.status_code == 200 and nodes.json()["items"]


def test_user_without_grants_sees_nothing(oidc: Oidc) -> None:
    session, final = oidc.login("bob", "/services")
    assert final.status_code == 200 and final.json()["items"] == []   # lists show only readable objects
    _problem(session.get(f"{oidc.base}/cluster", headers=JSON_ACCEPT, timeout=10), 403, "ACL001")
    assert session.get(f"{oidc.base}/auth/whoami", headers=JSON_ACCEPT, timeout=10).json()["subject"] == "bob-0002"


def test_no_credentials_is_401_with_bearer_challenge(oidc: Oidc) -> None:
    response = requests.get(f"{oidc.base}/services", headers=JSON_ACCEPT, timeout=10)
    _problem(response, 401, "AUT001")
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "Cookie" in response.headers["Vary"] and "Authorization" in response.headers["Vary"]
    response = requests.get(f"{oidc.base}/services", headers={**JSON_ACCEPT, "Authorization": "Basic eDp5"},
                            timeout=10)
    _problem(response, 401, "AUT001")
    whoami = requests.get(f"{oidc.base}/auth/whoami", headers=JSON_ACCEPT, timeout=10)
    _problem(whoami, 401, "AUT001")


def test_browser_without_session_is_sent_to_login(oidc: Oidc) -> None:
    response = requests.get(f"{oidc.base}/services", params={"q": "a b"}, headers=HTML_ACCEPT, timeout=10,
                            allow_redirects=False)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/auth/login"
    assert parse_qs(location.query)["redirect"] == ["/services?q=a+b"]
    # following it ends at the provider's authorize endpoint, then back with a session
    oidc.provider.next_user = "alice"
    session = requests.Session()
    final = browse(session, f"{oidc.base}/services", HTML_ACCEPT)
    assert final.status_code == 200 and final.url == f"{oidc.base}/services"
    assert final.headers["Content-Type"].startswith("text/html")
    assert session.cookies.get(SESSION_COOKIE)
    oidc.secrets_seen.append(session.cookies[SESSION_COOKIE])


def test_tampered_cookie_is_refused(oidc: Oidc) -> None:
    session, _ = oidc.login("bob")
    value = session.cookies[SESSION_COOKIE]
    payload, signature = value.rsplit(".", 1)
    flipped = payload[:-3] + ("A" if payload[-3] != "A" else "B") + payload[-2:]
    for forged in (f"{flipped}.{signature}", f"{payload}.{signature[::-1]}", "garbage"):
        cookies = {SESSION_COOKIE: forged}
        response = requests.get(f"{oidc.base}/services", headers=JSON_ACCEPT, cookies=cookies, timeout=10)
        body = _problem(response, 401, "AUT001")
        assert "not valid" in str(body["detail"])
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert f"{SESSION_COOKIE}=;" in response.headers["Set-Cookie"]   # the bad cookie is cleared
        browser = requests.get(f"{oidc.base}/nodes", headers=HTML_ACCEPT, cookies=cookies, timeout=10,
                               allow_redirects=False)
        assert browser.status_code == 302 and browser.headers["Location"].startswith("/auth/login?redirect=")
    # the untampered cookie still works
    assert requests.get(f"{oidc.base}/auth/whoami", headers=JSON_ACCEPT, cookies={SESSION_COOKIE: value},
                        timeout=10).status_code == 200


def test_bearer_id_tokens(oidc: Oidc) -> None:
    provider = oidc.provider

    def call(token: str) -> requests.Response:
        return requests.get(f"{oidc.base}/auth/whoami", headers={**JSON_ACCEPT, "Authorization": f"Bearer {token}"},
                            timeout=10)

    good = call(provider.mint("alice"))
    assert good.status_code == 200 and good.json()["subject"] == "alice-0001"
    services = requests.get(f"{oidc.base}/services", headers={**JSON_ACCEPT, "Authorization":
                                                              f"Bearer {provider.mint('alice')}"}, timeout=10)
    assert services.status_code == 200
    assert call(provider.mint("alice", aud=[provider.client_id, "other"], azp=provider.client_id)).status_code == 200
    refused = {
        "expired": (provider.mint("alice", expires_in=-300), "expired"),
        "unknown key": (provider.mint("alice", key=provider.other_key), "does not publish"),
        "same kid, other key": (provider.mint("alice", key=provider.other_key, kid=str(provider.key.kid)),
                                "signature"),
        "other audience": (provider.mint("alice", aud="someone-else"), "aud"),
        "multi-audience without azp": (provider.mint("alice", aud=[provider.client_id, "other"]), "azp"),
        "other issuer": (provider.mint("alice", issuer="http://127.0.0.1:1"), "iss"),
        "not yet valid": (provider.mint("alice", nbf=int(__import__("time").time()) + 3600), "nbf"),
        "not a JWT": ("opaque-token-value", "not a signed JWT"),
    }
    for case, (token, reason) in refused.items():
        response = call(token)
        body = _problem(response, 401, "AUT001")
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"'), (case, challenge)
        assert reason in challenge and reason in str(body["detail"]), (case, challenge)
        assert token not in challenge + str(body)


def test_callback_failures(oidc: Oidc) -> None:
    # no login in progress
    response = requests.get(f"{oidc.base}/auth/callback", params={"code": "x", "state": "y"}, timeout=10)
    _problem(response, 400, "AUT003")
    # a login in progress, but the state does not match
    session = requests.Session()
    start = session.get(f"{oidc.base}/auth/login", timeout=10, allow_redirects=False)
    assert start.status_code == 302 and start.headers["Location"].startswith(f"{oidc.provider.issuer}/authorize?")
    response = session.get(f"{oidc.base}/auth/callback", params={"code": "x", "state": "forged"}, timeout=10)
    _problem(response, 400, "AUT003")
    assert "shoal-login=;" in response.headers["Set-Cookie"]   # the flow is spent
    # the provider refuses the user
    oidc.provider.next_user = None
    session = requests.Session()
    response = browse(session, f"{oidc.base}/auth/login", JSON_ACCEPT)
    _problem(response, 403, "AUT002")
    assert "access_denied" in response.json()["detail"]
    assert not session.cookies.get(SESSION_COOKIE)
    # a replayed code (the provider's codes are single-use)
    oidc.provider.next_user = "alice"
    session = requests.Session()
    hop = session.get(f"{oidc.base}/auth/login", timeout=10, allow_redirects=False)
    callback = requests.get(hop.headers["Location"], timeout=10, allow_redirects=False).headers["Location"]
    flow = dict(session.cookies)
    assert session.get(callback, timeout=10, allow_redirects=False).status_code == 302
    oidc.secrets_seen.append(session.cookies[SESSION_COOKIE])
    replay = requests.get(callback, cookies=flow, timeout=10, allow_redirects=False)
    _problem(replay, 403, "AUT002")


def test_login_redirect_is_sanitised(oidc: Oidc) -> None:
    oidc.provider.next_user = "alice"
    for target, expected in (("https://evil.example/x", "/"), ("//evil.example/x", "/"), ("/\\evil", "/"),
                             ("/nodes?x=1", "/nodes?x=1")):
        session = requests.Session()
        hop = session.get(f"{oidc.base}/auth/login", params={"redirect": target}, timeout=10,
                          allow_redirects=False)
        callback = requests.get(hop.headers["Location"], timeout=10, allow_redirects=False).headers["Location"]
        done = session.get(callback, timeout=10, allow_redirects=False)
        assert done.status_code == 302 and done.headers["Location"] == expected, target
        oidc.secrets_seen.append(session.cookies[SESSION_COOKIE])


def test_logout(oidc: Oidc) -> None:
    session, _ = oidc.login("alice")
    copied = session.cookies[SESSION_COOKIE]
    refused = session.post(f"{oidc.base}/auth/logout", headers={"Origin": "http://evil.example"}, timeout=10,
                           allow_redirects=False)
    assert refused.status_code == 403
    refused = session.post(f"{oidc.base}/auth/logout", headers={"Sec-Fetch-Site": "cross-site"}, timeout=10,
                           allow_redirects=False)
    assert refused.status_code == 403
    assert session.get(f"{oidc.base}/auth/whoami", headers=JSON_ACCEPT, timeout=10).status_code == 200

    before = len(oidc.provider.logouts)
    response = session.post(f"{oidc.base}/auth/logout", headers={"Origin": oidc.base, "Sec-Fetch-Site":
                                                                  "same-origin"}, timeout=10, allow_redirects=False)
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location == f"{oidc.provider.issuer}/logout?client_id={oidc.provider.client_id}"
    assert f"{SESSION_COOKIE}=;" in response.headers["Set-Cookie"]
    assert not session.cookies.get(SESSION_COOKIE)
    _problem(session.get(f"{oidc.base}/services", headers=JSON_ACCEPT, timeout=10), 401, "AUT001")
    # the copied cookie is dead too
    replay = requests.get(f"{oidc.base}/services", headers=JSON_ACCEPT, cookies={SESSION_COOKIE: copied}, timeout=10)
    assert "logged out" in str(_problem(replay, 401, "AUT001")["detail"])
    # the browser follows to the provider's end-session endpoint
    assert requests.get(location, timeout=10).status_code == 200
    assert len(oidc.provider.logouts) == before + 1


def test_log_holds_no_credentials(oidc: Oidc) -> None:
    """Last: every code, token and session cookie of this module stays out of the service's log."""
    log = oidc.log.read_text(errors="replace")
    assert "oidc: login of subject alice-0001" in log   # the log is there and is written
    assert "GET /auth/callback?code=[redacted]&state=[redacted]&iss=" in log   # the access log, redacted
    values = oidc.provider.issued_codes + oidc.provider.issued_tokens + oidc.secrets_seen
    assert len(values) > 20
    leaked = [value[:12] + "…" for value in values if value and value in log]
    assert not leaked, leaked
    assert oidc.provider.client_secret not in log
