"""Mode headers: who is trusted (peer address, shared secret), what the identity headers give, and what
never leaks (the secret, forged values in logs)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask, request

from app.auth.headers import CHALLENGE, HeadersProvider, make_provider, parse_grants, parse_groups
from app.auth.identity import AuthenticationFailed, Identity, ProviderGrant
from app.config import Settings
from tests.fakes import FakeEngine
from tests.unit.support import Harness, build_harness

SECRET = "s3cr3t-value-42"


def provider(**overrides: Any) -> HeadersProvider:
    values: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User", "headers_name": "X-Name",
                              "headers_email": "X-Email", "headers_groups": "X-Groups",
                              "acl_headers_acl": "X-Acl", "trusted_proxies": ("127.0.0.1/32",), **overrides}
    return make_provider(Settings(**values))


_APP = Flask(__name__)


def authenticate(p: HeadersProvider, headers: dict[str, str], peer: str = "127.0.0.1") -> Identity:
    with _APP.test_request_context("/services", headers=headers, environ_base={"REMOTE_ADDR": peer}):
        return p.authenticate(request)


def refused(p: HeadersProvider, headers: dict[str, str], peer: str = "127.0.0.1") -> AuthenticationFailed:
    with pytest.raises(AuthenticationFailed) as caught:
        authenticate(p, headers, peer)
    assert caught.value.challenge == CHALLENGE
    return caught.value


# ---------------------------------------------------------------------------- trusted peers
@pytest.mark.parametrize(("networks", "peer"), [
    (("127.0.0.1/32",), "127.0.0.1"),
    (("10.0.0.0/8",), "10.20.30.40"),
    (("10.0.0.0/8", "192.168.1.0/24"), "192.168.1.77"),
    (("127.0.0.1/32",), "::ffff:127.0.0.1"),          # IPv4-mapped peer of a dual-stack socket
    (("::1/128",), "::1"),
    (("fd00::/8",), "fd12:3456::1"),
])
def test_trusted_peer_is_believed(networks: tuple[str, ...], peer: str) -> None:
    identity = authenticate(provider(trusted_proxies=networks), {"X-User": "alice"}, peer)
    assert identity.subject == "alice"
    assert identity.provider == "headers"
    assert not identity.anonymous


@pytest.mark.parametrize(("networks", "peer"), [
    (("127.0.0.1/32",), "127.0.0.2"),
    (("10.0.0.0/8",), "11.0.0.1"),
    (("127.0.0.1/32",), "::1"),                       # another family never matches
    (("::1/128",), "127.0.0.1"),
    (("fd00::/8",), "fe80::1"),
    (("127.0.0.1/32",), ""),                          # unix socket peer: no address
    (("127.0.0.1/32",), "not-an-address"),
])
def test_untrusted_peer_is_refused(networks: tuple[str, ...], peer: str) -> None:
    failure = refused(provider(trusted_proxies=networks), {"X-User": "mallory"}, peer)
    assert "not from a trusted proxy" in failure.detail
    assert "mallory" not in failure.detail


def test_forged_headers_from_untrusted_peer_are_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    refused(provider(), {"X-User": "forged-mallory", "X-Groups": "forged-admins", "X-Acl": "forged-acl",
                         "X-Forwarded-For": "6.6.6.6"}, peer="192.0.2.9")
    text = caplog.text + json.dumps([vars(r) for r in caplog.records], default=str)
    assert "192.0.2.9" in text                         # the peer is named
    for forged in ("forged-mallory", "forged-admins", "forged-acl", "6.6.6.6"):
        assert forged not in text


def test_forwarded_for_names_the_client_only_behind_a_trusted_proxy(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    p = provider(trusted_proxies=("127.0.0.1/32", "10.0.0.0/8"))
    refused(p, {"X-Forwarded-For": "203.0.113.5, 10.1.1.1"})     # trusted peer, no subject
    assert [r.__dict__.get("client") for r in caplog.records] == ["203.0.113.5"]
    with _APP.test_request_context("/", headers={"X-Forwarded-For": "198.51.100.1, 10.0.0.3"}):
        assert p.forwarded_client(request) == "198.51.100.1"        # trusted hops skipped
    with _APP.test_request_context("/", headers={"X-Forwarded-For": "junk"}):
        assert p.forwarded_client(request) is None


def test_forwarded_for_never_makes_a_peer_trusted() -> None:
    failure = refused(provider(), {"X-User": "alice", "X-Forwarded-For": "127.0.0.1",
                                   "X-Real-IP": "127.0.0.1"}, peer="192.0.2.1")
    assert "trusted proxy" in failure.detail


# ---------------------------------------------------------------------------- shared secret
def test_secret_right() -> None:
    p = provider(headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    assert authenticate(p, {"X-User": "alice", "X-Proxy-Secret": SECRET}).subject == "alice"


@pytest.mark.parametrize("sent", [None, "", "wrong", SECRET + "x", SECRET[:-1], SECRET.upper()])
def test_secret_wrong_or_missing(sent: str | None) -> None:
    p = provider(headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    headers = {"X-User": "alice"} | ({} if sent is None else {"X-Proxy-Secret": sent})
    failure = refused(p, headers)
    assert "secret" in failure.detail
    assert SECRET not in failure.detail


def test_secret_alone_trusts_any_peer() -> None:
    p = provider(trusted_proxies=(), headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    assert authenticate(p, {"X-User": "alice", "X-Proxy-Secret": SECRET}, peer="203.0.113.9").subject == "alice"
    refused(p, {"X-User": "alice"}, peer="203.0.113.9")


def test_both_configured_both_must_hold() -> None:
    p = provider(headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    assert "trusted proxy" in refused(p, {"X-User": "a", "X-Proxy-Secret": SECRET}, peer="127.0.0.2").detail
    assert "secret" in refused(p, {"X-User": "a", "X-Proxy-Secret": "nope"}, peer="127.0.0.1").detail


def test_non_ascii_secret() -> None:
    secret = "clé-secrète"
    p = provider(headers_secret_header="X-Proxy-Secret", headers_secret_value=secret)
    wire = secret.encode("utf-8").decode("latin-1")        # how WSGI hands over the UTF-8 bytes
    assert authenticate(p, {"X-User": "alice", "X-Proxy-Secret": wire}).subject == "alice"
    refused(p, {"X-User": "alice", "X-Proxy-Secret": "cle-secrete"})


def test_raw_never_contains_the_secret() -> None:
    p = provider(headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    identity = authenticate(p, {"X-User": "alice", "X-Name": "Alice", "X-Email": "a@example.com",
                                "X-Groups": "ops", "X-Acl": "[]", "X-Proxy-Secret": SECRET})
    assert identity.raw == {"X-User": "alice", "X-Name": "Alice", "X-Email": "a@example.com",
                            "X-Groups": "ops", "X-Acl": "[]"}
    assert SECRET not in json.dumps(identity.document())
    assert SECRET not in repr(identity)
    # even when an operator names the secret header as an identity header, raw leaves it out
    odd = provider(headers_name="X-Proxy-Secret", headers_secret_header="X-Proxy-Secret",
                   headers_secret_value=SECRET)
    identity = authenticate(odd, {"X-User": "alice", "X-Proxy-Secret": SECRET})
    assert SECRET not in json.dumps(identity.document())
    assert identity.display_name == "alice"


# ---------------------------------------------------------------------------- subject and attributes
@pytest.mark.parametrize("headers", [{}, {"X-User": ""}, {"X-User": "   "}])
def test_subject_missing(headers: dict[str, str]) -> None:
    assert "X-User" in refused(provider(), headers).detail


def test_subject_length_limit() -> None:
    assert authenticate(provider(), {"X-User": "a" * 256}).subject == "a" * 256
    assert authenticate(provider(), {"X-User": "  " + "a" * 256 + "  "}).subject == "a" * 256   # trimmed first
    failure = refused(provider(), {"X-User": "a" * 257})
    assert "256" in failure.detail and "a" * 257 not in failure.detail


def test_subject_not_printable() -> None:
    refused(provider(), {"X-User": "al\tice"})
    refused(provider(), {"X-User": "alice\x7f"})


def test_subject_utf8() -> None:
    wire = "jürgen".encode().decode("latin-1")
    assert authenticate(provider(), {"X-User": wire}).subject == "jürgen"


def wire(text: str) -> str:
    """How a WSGI server hands over a header's UTF-8 bytes (as Latin-1 text)."""
    return text.encode("utf-8").decode("latin-1")


# Each would map to another identity if trimmed or kept: NBSP, NEL, line/paragraph separators, ideographic
# and thin spaces, zero-width space/joiner, BOM, bidi override, soft hyphen (Cf), C0/C1 controls.
UNSAFE = ["admin\u00a0", "\u00a0admin", "admin\u0085", "admin\u2028", "admin\u2029", "admin\u3000",
          "ad\u2009min", "ad\u200bmin", "admin\u200d", "\ufeffadmin", "\u202eadmin", "ad\u00admin",
          "admin\x00", "admin\x1b[31m", "admin\x9b", "ad\tmin", "admin\ue000"]


@pytest.mark.parametrize("value", UNSAFE)
def test_subject_with_unsafe_characters_is_refused_not_trimmed(value: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    failure = refused(provider(), {"X-User": wire(value)})
    assert "X-User" in failure.detail and "control, format or non-HTTP whitespace" in failure.detail
    assert "admin" not in failure.detail and "admin" not in caplog.text      # never echoed, never logged


def test_only_http_whitespace_is_trimmed() -> None:
    assert authenticate(provider(), {"X-User": " \t admin \t "}).subject == "admin"
    assert authenticate(provider(), {"X-User": wire("jürgen müller")}).subject == "jürgen müller"


def test_no_normalisation_distinct_code_points_stay_distinct() -> None:
    fullwidth = "\uff41\uff44\uff4d\uff49\uff4e"       # NFKC would make it "admin"
    assert authenticate(provider(), {"X-User": wire(fullwidth)}).subject == fullwidth
    decomposed = "jo\u0301se"                                  # NFC would compose it
    assert authenticate(provider(), {"X-User": wire(decomposed)}).subject == decomposed
    assert authenticate(provider(), {"X-User": "Admin"}).subject == "Admin"   # no case folding


def test_subject_must_be_utf8_no_latin1_fallback() -> None:
    """Latin-1 E9 and UTF-8 C3 A9 would otherwise both be the subject "é"."""
    failure = refused(provider(), {"X-User": "jos\xe9"})
    assert "not UTF-8" in failure.detail
    assert authenticate(provider(), {"X-User": wire("josé")}).subject == "josé"


@pytest.mark.parametrize(("header", "value"), [
    ("X-Name", wire("Alice\u00a0")), ("X-Email", wire("alice@example.com\u200b")), ("X-Groups", wire("ops\u00a0")),
    ("X-Groups", wire("dev, ops\u2028")), ("X-Groups", "o\tps"),
    ("X-Acl", wire('[{"resources":["*"],"permissions":["read"]}]\u00a0')),
    ("X-Acl", wire('[{"resources":["stack:web\u200b"],"permissions":["read"]}]')),
    ("X-Name", "\xff\xfe"),                     # not UTF-8
])
def test_other_identity_headers_with_unsafe_characters_refuse_the_request(header: str, value: str) -> None:
    """A group ``ops`` + NBSP must not become ``ops`` (nor be silently dropped): the request is refused."""
    failure = refused(provider(), {"X-User": "alice", header: value})
    assert header in failure.detail


def test_grants_header_may_hold_json_whitespace() -> None:
    value = '[\t{"resources": ["service:api"],\t"permissions": ["read"]}\t]'
    assert len(authenticate(provider(), {"X-User": "alice", "X-Acl": value}).grants) == 1


def test_name_email_and_defaults() -> None:
    full = authenticate(provider(), {"X-User": " alice ", "X-Name": " Alice A. ", "X-Email": "a@example.com"})
    assert (full.subject, full.display_name, full.email) == ("alice", "Alice A.", "a@example.com")
    bare = authenticate(provider(), {"X-User": "alice", "X-Name": "  ", "X-Email": ""})
    assert (bare.display_name, bare.email, bare.groups, bare.grants) == ("alice", None, (), ())
    assert bare.document() == {"subject": "alice", "displayName": "alice", "provider": "headers",
                               "raw": {"X-User": "alice", "X-Name": "  ", "X-Email": ""}}


def test_unconfigured_headers_are_ignored() -> None:
    p = provider(headers_name=None, headers_email=None, headers_groups=None, acl_headers_acl=None)
    identity = authenticate(p, {"X-User": "alice", "X-Name": "N", "X-Email": "e@x", "X-Groups": "g",
                                "X-Acl": '[{"resources":["*"],"permissions":["write"]}]'})
    assert (identity.display_name, identity.email, identity.groups, identity.grants) == ("alice", None, (), ())
    assert identity.raw == {"X-User": "alice"}


@pytest.mark.parametrize(("value", "groups"), [
    ("ops", ("ops",)),
    ("ops, dev ,  qa", ("ops", "dev", "qa")),
    (",ops,,dev,", ("ops", "dev")),
    ("ops,ops", ("ops",)),
    ("  ,  , ", ()),
    ("", ()),
    ("team one, team two", ("team one", "team two")),
])
def test_groups_parsing(value: str, groups: tuple[str, ...]) -> None:
    assert parse_groups(value) == groups
    assert authenticate(provider(), {"X-User": "alice", "X-Groups": value}).groups == groups


# ---------------------------------------------------------------------------- provider grants
def test_grants_valid() -> None:
    value = json.dumps([{"resources": ["stack:web-*", "service:api"], "permissions": ["read"]},
                        {"resources": ["*"], "permissions": ["write"]}])
    assert parse_grants(value, "X-Acl") == (
        ProviderGrant(("stack:web-*", "service:api"), frozenset({"read"})),
        ProviderGrant(("*",), frozenset({"read", "write"})))
    identity = authenticate(provider(), {"X-User": "alice", "X-Acl": value})
    assert len(identity.grants) == 2


def test_grants_invalid_entries_dropped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    good = {"resources": ["service:api"], "permissions": ["read"]}
    value = json.dumps([good, 3, "x", None, {}, {"resources": [], "permissions": ["read"]},
                        {"resources": ["service:api"]}, {"resources": ["service:api"], "permissions": []},
                        {"resources": ["bogus:x"], "permissions": ["read"]},
                        {"resources": ["service:api", "nocolon"], "permissions": ["read"]},
                        {"resources": ["service:api"], "permissions": ["admin"]},
                        {"resources": "service:api", "permissions": ["read"]}])
    assert parse_grants(value, "X-Acl") == (ProviderGrant(("service:api",), frozenset({"read"})),)
    assert any(r.__dict__.get("dropped") == 11 for r in caplog.records)


@pytest.mark.parametrize("value", ["not json at all", '{"resources": ["*"]}', '"[]"', "[", "42"])
def test_grants_not_a_json_array(value: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert parse_grants(value, "X-Acl") == ()
    identity = authenticate(provider(), {"X-User": "alice", "X-Acl": value})
    assert identity.grants == () and identity.subject == "alice"     # bad grants never fail the login
    assert "X-Acl" in caplog.text and value not in caplog.text.replace("X-Acl", "")


def test_grants_empty_array_or_blank() -> None:
    assert parse_grants("[]", "X-Acl") == ()
    assert parse_grants("  ", "X-Acl") == ()
    assert parse_grants(None, "X-Acl") == ()


# ---------------------------------------------------------------------------- through the app
@pytest.fixture
def headers_app(fake_engine: FakeEngine) -> Iterator[Harness]:
    harness = build_harness(fake_engine, auth_mode="headers", headers_subject="X-User",
                            headers_groups="X-Groups", trusted_proxies=("127.0.0.1/32",),
                            headers_secret_header="X-Proxy-Secret", headers_secret_value=SECRET)
    harness.start()
    yield harness
    harness.stop()


def test_hook_answers_401_problem(headers_app: Harness) -> None:
    client = headers_app.app.test_client()
    answer = client.get("/services", headers={"X-User": "mallory", "Accept": "application/json"},
                        environ_base={"REMOTE_ADDR": "127.0.0.2"})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == CHALLENGE
    assert answer.mimetype == "application/problem+json"
    body = answer.get_json()
    assert body["type"].endswith("/api/errors/AUT001") and "trusted proxy" in body["detail"]
    assert "mallory" not in answer.get_data(as_text=True)


def test_hook_lets_the_proxy_in(headers_app: Harness) -> None:
    client = headers_app.app.test_client()
    answer = client.get("/services", headers={"X-User": "alice", "X-Proxy-Secret": SECRET,
                                              "Accept": "application/json"})
    assert answer.status_code == 200
    assert "Authorization" in answer.headers["Vary"]
    missing = client.get("/services", headers={"X-User": "alice", "Accept": "application/json"})
    assert missing.status_code == 401 and SECRET not in missing.get_data(as_text=True)


def test_meta_paths_bypass(headers_app: Harness) -> None:
    client = headers_app.app.test_client()
    assert client.get("/-/health", environ_base={"REMOTE_ADDR": "192.0.2.1"}).status_code == 200


def test_subject_header_cannot_be_the_secret_header() -> None:
    from app.config import ConfigError

    with pytest.raises(ConfigError):
        provider(headers_subject="X-Proxy-Secret", headers_secret_header="x-proxy-secret",
                 headers_secret_value=SECRET)


def test_a_deeply_nested_grants_header_gives_no_grants_not_a_500() -> None:
    assert parse_grants("[" * 5000 + "]" * 5000, "X-Acl") == ()
