"""OIDC mode pieces without a network: signed cookies (tamper, expiry, purpose, attributes), claim mapping,
redirect sanitising, token verification against a fake discovery (keys, rotation, rate limit, claims),
the provider's authenticate() answers, the access-log redaction and the routes in other modes."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

import pytest
from flask import Flask, Response
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from app import create_app
from app.auth.identity import AuthenticationFailed, Identity, LoginRequired, ProviderGrant, ProviderRefused
from app.auth.oidc import OidcProvider, safe_redirect
from app.auth.oidc_claims import grants_of, groups_of, identity_from_claims, identity_from_dict, identity_to_dict
from app.auth.oidc_cookies import FLOW, SESSION, CookieInvalid, SignedCookies
from app.auth.oidc_discovery import JWKS_MIN_INTERVAL, Discovery, ProviderUnavailable
from app.auth.oidc_tokens import TokenRejected, TokenVerifier
from app.config import Settings
from app.logconfig import RedactCredentials

ISSUER = "https://idp.example"
CLIENT = "shoal"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
ROTATED = RSAKey.generate_key(2048, parameters={"kid": "k2"})
ROGUE = RSAKey.generate_key(2048, parameters={"kid": "k1"})


class FakeIdp:
    """A fetch function serving discovery and a JWKS whose keys the test changes; counts fetches."""

    def __init__(self) -> None:
        self.keys = [KEY]
        self.fetches: list[str] = []
        self.down = False

    def __call__(self, url: str, timeout: float) -> Any:
        self.fetches.append(url)
        if self.down:
            raise ProviderUnavailable(f"{url}: ConnectionError")
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize",
                    "token_endpoint": f"{ISSUER}/token", "jwks_uri": f"{ISSUER}/jwks"}
        return {"keys": [key.as_dict(private=False) for key in self.keys]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def mint(key: RSAKey = KEY, alg: str = "RS256", **overrides: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "u1", "iat": now, "exp": now + 300, **overrides}
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode({"alg": alg, "kid": key.kid}, claims, key, algorithms=[alg])


@pytest.fixture
def idp() -> FakeIdp:
    return FakeIdp()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def verifier(idp: FakeIdp, clock: Clock) -> TokenVerifier:
    return TokenVerifier(Discovery(ISSUER, fetch=idp, clock=clock), CLIENT)


# --------------------------------------------------------------------------- cookies
def test_cookie_round_trip_and_tamper() -> None:
    cookies = SignedCookies(b"k" * 32, secure=False)
    value = cookies.seal(SESSION, {"sub": "u1"}, time.time() + 60)
    assert cookies.open(SESSION, value) == {"sub": "u1"}
    payload, signature = value.rsplit(".", 1)
    # a character inside each part: the last base64 character also holds padding bits, so changing only
    # those decodes to the same signature (the same MAC, not a forgery) and made this test fail now and then
    def flip(text: str, at: int) -> str:
        return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1:]

    for forged in (flip(payload, len(payload) // 2) + "." + signature,
                   payload + "." + flip(signature, len(signature) // 2), "", "x.y", "garbage"):
        with pytest.raises(CookieInvalid):
            cookies.open(SESSION, forged)
    with pytest.raises(CookieInvalid, match="signature"):   # another key
        SignedCookies(b"o" * 32, secure=False).open(SESSION, value)
    with pytest.raises(CookieInvalid, match="signature"):   # a flow cookie is never a session
        cookies.open(SESSION, cookies.seal(FLOW, {"sub": "u1"}, time.time() + 60))


def test_cookie_expiry_is_in_the_signed_value() -> None:
    cookies = SignedCookies(b"k" * 32, secure=False)
    value = cookies.seal(SESSION, {"sub": "u1"}, 2000)
    assert cookies.open(SESSION, value, now=1999) == {"sub": "u1"}
    with pytest.raises(CookieInvalid, match="expired"):
        cookies.open(SESSION, value, now=2000)


def test_cookie_attributes_with_and_without_tls() -> None:
    for secure, name in ((True, "__Host-shoal-session"), (False, "shoal-session")):
        cookies = SignedCookies(b"k" * 32, secure=secure)
        response = Response()
        cookies.set(response, SESSION, "v", 120)
        header = response.headers["Set-Cookie"]
        assert header.startswith(f"{name}=v;") and "HttpOnly" in header and "SameSite=Lax" in header
        assert "Path=/" in header and "Domain" not in header and "Max-Age=120" in header
        assert ("Secure" in header) is secure


def test_cookie_size_is_bounded() -> None:
    with pytest.raises(ValueError, match="bytes"):
        groups = [secrets.token_hex(16) for _ in range(200)]   # random: the serializer compresses
        SignedCookies(b"k" * 32, secure=False).seal(SESSION, {"groups": groups}, time.time() + 60)


# --------------------------------------------------------------------------- claims
def test_claim_mapping() -> None:
    claims = {"iss": ISSUER, "sub": "u1", "name": "Ann", "email": "ann@example.com", "nonce": "n", "at_hash": "h",
              "groups": ["a", "b", "a", 7], "acl": [{"resources": ["stack:web"], "permissions": ["write"]},
                                                   {"resources": ["bogus"], "permissions": ["read"]}, "x"]}
    identity = identity_from_claims(claims, "acl")
    assert (identity.subject, identity.display_name, identity.email, identity.provider) == (
        "u1", "Ann", "ann@example.com", "oidc")
    assert identity.groups == ()   # not a list of strings: no groups rather than a guess
    assert identity.grants == (ProviderGrant(("stack:web",), frozenset({"read", "write"})),)
    assert identity.raw == {"iss": ISSUER, "sub": "u1", "name": "Ann", "email": "ann@example.com"}
    assert groups_of({"groups": ["a", "b", "a"]}) == ("a", "b")
    assert groups_of({"groups": "a, b"}) == ("a", "b")
    assert grants_of({"acl": '[{"resources":["*"],"permissions":["read"]}]'}, "acl")[0].resources == ("*",)
    assert grants_of({"acl": "not json"}, "acl") == () and grants_of({"acl": []}, None) == ()
    assert identity_from_claims({"sub": "u2", "preferred_username": "bee"}, None).display_name == "bee"
    assert identity_from_claims({"sub": "u3"}, None).display_name == "u3"


def test_session_payload_round_trip() -> None:
    identity = Identity("u1", "Ann", "oidc", "ann@example.com", ("g",), {"sub": "u1"},
                        (ProviderGrant(("stack:web",), frozenset({"read"})),))
    assert identity_from_dict(identity_to_dict(identity)) == identity
    for bad in ({}, {"sub": 1, "name": "x"}, {"sub": "u", "name": "x", "groups": "g"},
                {"sub": "u", "name": "x", "grants": [["a"]]}):
        with pytest.raises(ValueError):
            identity_from_dict(bad)


# --------------------------------------------------------------------------- redirects
@pytest.mark.parametrize(("value", "base", "expected"), [
    (None, "", "/"), ("", "/shoal", "/shoal/"), ("/services?x=1", "", "/services?x=1"),
    ("/services", "/shoal", "/shoal/services"), ("/shoal/nodes", "/shoal", "/shoal/nodes"),
    ("https://evil.example/", "", "/"), ("//evil.example/x", "", "/"), ("/\\evil.example", "", "/"),
    ("services", "", "/"), ("/a b", "", "/"), ("/x\r\nSet-Cookie: a=b", "", "/"), ("javascript:alert(1)", "", "/"),
    ("/" + "a" * 3000, "", "/"),
])
def test_safe_redirect(value: str | None, base: str, expected: str) -> None:
    assert safe_redirect(value, base) == expected


# --------------------------------------------------------------------------- tokens
def test_verifier_accepts_a_good_token(verifier: TokenVerifier) -> None:
    assert verifier.verify(mint())["sub"] == "u1"
    assert verifier.verify(mint(aud=[CLIENT, "api"], azp=CLIENT))["sub"] == "u1"
    assert verifier.verify(mint(nonce="n1"), nonce="n1")["nonce"] == "n1"


@pytest.mark.parametrize(("token", "reason"), [
    (lambda: mint(exp=int(time.time()) - 120), "expired"),
    (lambda: mint(nbf=int(time.time()) + 600), "'nbf'"),
    (lambda: mint(iss="https://other.example"), "'iss'"),
    (lambda: mint(aud="other"), "aud"),
    (lambda: mint(aud=[CLIENT, "api"]), "azp"),
    (lambda: mint(azp="other"), "azp"),
    (lambda: mint(sub=None), "'sub'"),
    (lambda: mint(exp=None), "'exp'"),
    (lambda: mint(key=ROGUE), "signature"),
    (lambda: mint(key=ROTATED), "does not publish"),
    (lambda: "a.b", "not a signed JWT"),
    (lambda: "e30.e30.", "algorithm"),
    (lambda: jwt.encode({"alg": "HS256", "kid": "k1"}, {"sub": "u1"}, OctKey.import_key(b"s" * 32)), "algorithm"),
])
def test_verifier_rejects(verifier: TokenVerifier, token: Any, reason: str) -> None:
    value = token()
    with pytest.raises(TokenRejected) as caught:
        verifier.verify(value)
    assert reason in caught.value.reason and value not in caught.value.reason


def test_verifier_checks_the_nonce(verifier: TokenVerifier) -> None:
    for token in (mint(nonce="other"), mint()):
        with pytest.raises(TokenRejected, match="nonce"):
            verifier.verify(token, nonce="n1")


def test_unknown_kid_refreshes_keys_at_most_every_interval(idp: FakeIdp, clock: Clock,
                                                           verifier: TokenVerifier) -> None:
    verifier.verify(mint())
    assert len(idp.fetches) == 2   # discovery + keys, fetched lazily on first use
    idp.keys = [KEY, ROTATED]      # the provider rotates: the new kid triggers a refresh
    clock.now += JWKS_MIN_INTERVAL
    assert verifier.verify(mint(key=ROTATED))["sub"] == "u1"
    assert len(idp.fetches) == 3
    for _ in range(5):   # unknown kids right after a refresh do not hammer the provider
        with pytest.raises(TokenRejected):
            verifier.verify(mint(key=RSAKey.generate_key(2048, parameters={"kid": "k9"})))
    assert len(idp.fetches) == 3


def test_provider_down_fails_fast(idp: FakeIdp, clock: Clock, verifier: TokenVerifier) -> None:
    idp.down = True
    with pytest.raises(ProviderUnavailable):
        verifier.verify(mint())
    with pytest.raises(ProviderUnavailable, match="not retried"):
        verifier.verify(mint())
    assert len(idp.fetches) == 1
    idp.down = False
    clock.now += 11
    assert verifier.verify(mint())["sub"] == "u1"


def test_discovery_must_name_the_configured_issuer() -> None:
    def fetch(url: str, timeout: float) -> Any:
        return {"issuer": "https://evil.example", "authorization_endpoint": "https://x/a",
                "token_endpoint": "https://x/t", "jwks_uri": "https://x/j"}

    with pytest.raises(ProviderUnavailable, match="issuer"):
        Discovery(ISSUER, fetch=fetch).metadata()


# --------------------------------------------------------------------------- the provider
def _settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"auth_mode": "oidc", "oidc_issuer": ISSUER, "oidc_client_id": CLIENT,
                              "oidc_client_secret": "secret", "oidc_redirect_url": "http://127.0.0.1:9/auth/callback",
                              "acl_oidc_claim": "acl", "data_dir": ":memory:", **overrides}
    return Settings(**values)


@pytest.fixture
def provider(idp: FakeIdp) -> OidcProvider:
    return OidcProvider(_settings(), discovery=Discovery(ISSUER, fetch=idp))


def _authenticate(provider: OidcProvider, **request: Any) -> Identity:
    app = Flask(__name__)
    with app.test_request_context("/services", **request):
        from flask import request as current

        return provider.authenticate(current)


def test_authenticate_answers(provider: OidcProvider, idp: FakeIdp) -> None:
    token = mint(acl=[{"resources": ["stack:web"], "permissions": ["read"]}], groups=["ops"])
    identity = _authenticate(provider, headers={"Authorization": f"Bearer {token}"})
    assert identity.subject == "u1" and identity.groups == ("ops",) and identity.grants
    with pytest.raises(AuthenticationFailed) as failed:
        _authenticate(provider, headers={"Accept": "application/json"})
    assert failed.value.challenge == "Bearer"
    with pytest.raises(AuthenticationFailed) as failed:
        _authenticate(provider, headers={"Authorization": f"Bearer {mint(exp=1)}"})
    assert failed.value.challenge == 'Bearer error="invalid_token", error_description="the token has expired"'
    with pytest.raises(LoginRequired) as login:
        _authenticate(provider, headers={"Accept": "text/html"}, query_string="q=a&b=1")
    assert login.value.location == "/auth/login?redirect=/services%3Fq%3Da%26b%3D1"
    with pytest.raises(AuthenticationFailed):   # a browser with a bearer token gets the 401, not a redirect
        _authenticate(provider, headers={"Accept": "text/html", "Authorization": "Bearer x.y.z"})
    session = provider.cookies.seal(SESSION, {**identity_to_dict(identity), "sid": "s1"}, time.time() + 60)
    cookie = {"Cookie": f"shoal-session={session}"}
    assert _authenticate(provider, headers=cookie) == identity
    provider.revoked.add("s1", time.time() + 60)
    with pytest.raises(AuthenticationFailed, match="logged out"):
        _authenticate(provider, headers=cookie)
    idp.down = True
    with pytest.raises(ProviderRefused):
        _authenticate(OidcProvider(_settings(), discovery=Discovery(ISSUER, fetch=idp)),
                      headers={"Authorization": f"Bearer {mint()}"})


def test_access_log_redaction() -> None:
    record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, '%s "%s" %s',
                               ("127.0.0.1", "GET /auth/callback?code=SECRET1&state=SECRET2&iss=x HTTP/1.1", 302),
                               None)
    assert RedactCredentials().filter(record)
    assert record.getMessage() == '127.0.0.1 "GET /auth/callback?code=[redacted]&state=[redacted]&iss=x HTTP/1.1" 302'


def test_routes_are_404_in_other_modes() -> None:
    client = create_app(Settings(data_dir=":memory:"), configure_logging=False).test_client()
    for method, path in (("get", "/auth/login"), ("get", "/auth/callback"), ("post", "/auth/logout")):
        response = getattr(client, method)(path, headers={"Accept": "application/json"})
        assert response.status_code == 404 and "oidc" in response.get_json()["detail"]
