"""Auth mode headers behind a real nginx (Debian package) in front of a real gunicorn on the lab swarm.

nginx authenticates with ``auth_basic`` and forwards ``X-Forwarded-User``, groups, email, a provider
grants header and the shared secret from 127.0.0.1 (the only trusted proxy address). The service is also
called directly: from 127.0.0.2 (untrusted) with forged identity headers, and from 127.0.0.1 without or
with a wrong secret. Every refusal is a 401 ``AUT001`` problem; the forged values, the secret, the
passwords and the ``Authorization``/``Cookie`` values never reach the service's log.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from app.auth.headers import CHALLENGE
from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn
from tests.nginx import NginxProxy, start_nginx, stop_nginx

SECRET_HEADER = "X-Proxy-Secret"
SECRET = "proxy-" + secrets.token_hex(16)
# "root" reads everything; the proxy also knows look-alike accounts (root + NBSP, + U+2028, + zero-width
# space) that must never become root: Shoal refuses them (identity headers are trimmed of SP/HTAB only).
LOOKALIKES = ("root\u00a0", "root\u2028", "ro\u200bot")
PASSWORDS = {"alice": "alice-pw-" + secrets.token_hex(6), "bob": "bob-pw-" + secrets.token_hex(6),
             "carol": "carol-pw-" + secrets.token_hex(6), "root": "root-pw-" + secrets.token_hex(6),
             **{user: f"look-{index}-" + secrets.token_hex(6) for index, user in enumerate(LOOKALIKES)}}
FORGED = "forged-mallory-" + secrets.token_hex(4)
ACL_HEADER = "X-Shoal-Grants"
# alice (group ops) reads the demo stack's services by policy; bob has no grant; carol reads demo_web by the
# provider grants header nginx sends for her (and an invalid entry that is dropped).
POLICY = {"grants": [{"resources": ["service:demo_*"], "audience": ["group:ops"], "permissions": ["read"]},
                     {"resources": ["*"], "audience": ["user:root"], "permissions": ["read"]}]}
CAROL_GRANTS = [{"resources": ["service:demo_web"], "permissions": ["read"]},
                {"resources": ["nonsense"], "permissions": ["read"]}]
JSON_ACCEPT = {"Accept": "application/json"}


class SourceAddress(HTTPAdapter):
    """Connections from a chosen local address (127.0.0.2 is loopback on Linux, but not a trusted proxy)."""

    def __init__(self, host: str) -> None:
        self._source = (host, 0)
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = self._source
        super().init_poolmanager(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class Stack:
    service: str           # gunicorn, direct
    proxy: NginxProxy
    log: Path              # gunicorn's log

    def service_log(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def stack(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("gunicorn-headers") / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state-headers")),
                       SERVICE_LOG_LEVEL="debug",
                       SERVICE_AUTH_MODE="headers", SERVICE_TRUSTED_PROXIES="127.0.0.1/32",
                       SERVICE_AUTH_HEADERS_SUBJECT="X-Forwarded-User",
                       SERVICE_AUTH_HEADERS_GROUPS="X-Forwarded-Groups",
                       SERVICE_AUTH_HEADERS_EMAIL="X-Forwarded-Email",
                       SERVICE_AUTH_HEADERS_SECRET_HEADER=SECRET_HEADER,
                       SERVICE_AUTH_HEADERS_SECRET_VALUE=SECRET,
                       SERVICE_AUTH_HEADERS_ACL=ACL_HEADER,
                       SERVICE_ACL_POLICY=json.dumps(POLICY))
    process = launch_gunicorn(env, log_path, base)
    proxy = start_nginx(tmp_path_factory.mktemp("nginx"), base, PASSWORDS, user_header="X-Forwarded-User",
                        per_user={"X-Forwarded-Groups": {"alice": "ops, dev"},
                                  "X-Forwarded-Email": {"alice": "alice@example.com"},
                                  ACL_HEADER: {"carol": json.dumps(CAROL_GRANTS)}},
                        secret=(SECRET_HEADER, SECRET))
    try:
        yield Stack(base, proxy, log_path)
    finally:
        stop_nginx(proxy)
        stop_gunicorn(process, log_path)
    text = log_path.read_text(errors="replace")
    for leaked in (SECRET, FORGED, *PASSWORDS.values()):
        assert leaked not in text, f"{leaked!r} reached the service log"


def names(response: requests.Response) -> set[str]:
    assert response.status_code == 200, response.text[:500]
    return {item["Spec"]["Name"] for item in response.json()["items"]}


def assert_unauthenticated(response: requests.Response, reason: str) -> None:
    assert response.status_code == 401, response.text[:500]
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.headers["WWW-Authenticate"] == CHALLENGE
    body = response.json()
    assert body["type"].endswith("/api/errors/AUT001") and body["status"] == 401
    assert reason in body["detail"], body["detail"]


# ---------------------------------------------------------------------------- through nginx
def test_good_credentials_through_the_proxy(stack: Stack) -> None:
    answer = requests.get(f"{stack.proxy.url}/services", auth=("alice", PASSWORDS["alice"]),
                          headers=JSON_ACCEPT, timeout=10)
    seen = names(answer)
    assert seen and all(name.startswith("demo_") for name in seen), seen   # the policy's group:ops grant
    assert "Authorization" in answer.headers["Vary"]


def test_identity_reaches_the_acl(stack: Stack) -> None:
    """bob has no grant: he is let in (authenticated as bob) and the list is filtered to nothing; carol's
    provider grants header gives her exactly demo_web."""
    bob = requests.get(f"{stack.proxy.url}/services", auth=("bob", PASSWORDS["bob"]), headers=JSON_ACCEPT,
                       timeout=10)
    assert names(bob) == set()
    carol = requests.get(f"{stack.proxy.url}/services", auth=("carol", PASSWORDS["carol"]), headers=JSON_ACCEPT,
                         timeout=10)
    assert names(carol) == {"demo_web"}


def test_forged_headers_through_the_proxy_are_replaced(stack: Stack) -> None:
    """nginx overwrites the client's identity and secret headers: bob cannot claim alice's groups."""
    answer = requests.get(f"{stack.proxy.url}/services", auth=("bob", PASSWORDS["bob"]), timeout=10,
                          headers={**JSON_ACCEPT, "X-Forwarded-User": FORGED, "X-Forwarded-Groups": "ops",
                                   SECRET_HEADER: "forged-secret"})
    assert names(answer) == set()          # still bob, without alice's group


def test_bad_password_is_nginx_401(stack: Stack) -> None:
    answer = requests.get(f"{stack.proxy.url}/services", auth=("alice", "wrong-" + PASSWORDS["alice"]),
                          headers=JSON_ACCEPT, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="shoal"'
    anonymous = requests.get(f"{stack.proxy.url}/services", headers=JSON_ACCEPT, timeout=10)
    assert anonymous.status_code == 401


def test_lookalike_proxy_users_never_become_root(stack: Stack) -> None:
    """nginx authenticates "root" + NBSP (its own, distinct account) and forwards the name's UTF-8 bytes:
    Shoal refuses it (401 AUT001 naming the header, never the value) instead of trimming it to root."""
    root = requests.get(f"{stack.proxy.url}/services", auth=("root", PASSWORDS["root"]), headers=JSON_ACCEPT,
                        timeout=10)
    alice = requests.get(f"{stack.proxy.url}/services", auth=("alice", PASSWORDS["alice"]), headers=JSON_ACCEPT,
                         timeout=10)
    assert names(root) >= names(alice) and names(alice)
    for user in LOOKALIKES:
        answer = requests.get(f"{stack.proxy.url}/services", headers=JSON_ACCEPT, timeout=10,
                              auth=(user.encode(), PASSWORDS[user].encode()))    # UTF-8, as htpasswd holds it
        assert_unauthenticated(answer, "X-Forwarded-User")
        assert "control, format or non-HTTP whitespace" in answer.json()["detail"]
        assert "root" not in answer.json()["detail"]
        whoami = requests.get(f"{stack.proxy.url}/auth/whoami", headers=JSON_ACCEPT, timeout=10,
                              auth=(user.encode(), PASSWORDS[user].encode()))
        assert whoami.status_code == 401
    log = stack.service_log()
    assert "identity header X-Forwarded-User is not UTF-8 or holds a control" in log
    for user in LOOKALIKES:
        assert user not in log and user.encode().decode("latin-1") not in log


def test_options_through_the_proxy_is_the_callers(stack: Stack) -> None:
    """OPTIONS is authenticated (nginx's own 401 first, Shoal's when it comes direct) and lists no write
    for a reader: the policy grants read only."""
    reader = requests.options(f"{stack.proxy.url}/services", auth=("alice", PASSWORDS["alice"]), timeout=10)
    assert reader.status_code == 200 and reader.headers["Allow"] == "GET, HEAD"
    direct = requests.options(f"{stack.service}/services", timeout=10)
    assert_unauthenticated(direct, "secret")
    assert "Allow" not in direct.headers


# ---------------------------------------------------------------------------- direct to the service
def test_forged_header_from_an_untrusted_address(stack: Stack) -> None:
    session = requests.Session()
    session.mount("http://", SourceAddress("127.0.0.2"))
    answer = session.get(f"{stack.service}/services", timeout=10,
                         headers={**JSON_ACCEPT, "X-Forwarded-User": FORGED, "X-Forwarded-Groups": "ops",
                                  SECRET_HEADER: SECRET, "X-Forwarded-For": "127.0.0.1"})
    assert_unauthenticated(answer, "not from a trusted proxy")
    assert FORGED not in answer.text
    log = stack.service_log()
    assert "127.0.0.2" in log            # the refusal is logged with the peer...
    assert FORGED not in log             # ...never with the forged identity


def test_trusted_address_without_or_with_a_wrong_secret(stack: Stack) -> None:
    headers = {**JSON_ACCEPT, "X-Forwarded-User": FORGED}
    missing = requests.get(f"{stack.service}/services", headers=headers, timeout=10)
    assert_unauthenticated(missing, "secret")
    wrong = requests.get(f"{stack.service}/services", headers={**headers, SECRET_HEADER: SECRET[:-1]}, timeout=10)
    assert_unauthenticated(wrong, "secret")
    assert FORGED not in stack.service_log()


def test_trusted_address_with_the_secret_but_no_subject(stack: Stack) -> None:
    answer = requests.get(f"{stack.service}/services", headers={**JSON_ACCEPT, SECRET_HEADER: SECRET}, timeout=10)
    assert_unauthenticated(answer, "X-Forwarded-User")


def test_bypassed_paths_need_no_identity(stack: Stack) -> None:
    session = requests.Session()
    session.mount("http://", SourceAddress("127.0.0.2"))
    assert session.get(f"{stack.service}/-/health", timeout=10).status_code == 200
    assert session.get(f"{stack.service}/api", headers=JSON_ACCEPT, timeout=10).status_code == 200


def test_credentials_never_logged(stack: Stack) -> None:
    """Authorization and Cookie values sent straight to the service (a misconfigured proxy passing them
    through) and the shared secret never appear in its log."""
    token = secrets.token_urlsafe(24)
    basic = base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
    for authorization in (f"Bearer {token}", f"Basic {basic}"):
        answer = requests.get(f"{stack.service}/services", timeout=10,
                              headers={**JSON_ACCEPT, "Authorization": authorization, "Cookie": f"session={token}",
                                       "X-Forwarded-User": "alice", "X-Forwarded-Groups": "ops",
                                       SECRET_HEADER: SECRET})
        assert names(answer)
    log = stack.service_log()
    for leaked in (token, basic, PASSWORDS["alice"], SECRET):
        assert leaked not in log


# ---------------------------------------------------------------------------- /auth/whoami and /profile
def test_whoami_through_the_proxy(stack: Stack) -> None:
    answer = requests.get(f"{stack.proxy.url}/auth/whoami", auth=("alice", PASSWORDS["alice"]),
                          headers={**JSON_ACCEPT, "X-Forwarded-User": FORGED}, timeout=10)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.json()
    assert (body["@type"], body["subject"], body["displayName"], body["provider"]) == \
        ("Identity", "alice", "alice", "headers")
    assert body["email"] == "alice@example.com" and body["groups"] == ["ops", "dev"]
    assert body["raw"] == {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "ops, dev",
                           "X-Forwarded-Email": "alice@example.com"}
    assert SECRET not in answer.text and FORGED not in answer.text


def test_profile_shows_provider_grants(stack: Stack) -> None:
    answer = requests.get(f"{stack.proxy.url}/profile", auth=("carol", PASSWORDS["carol"]), headers=JSON_ACCEPT,
                          timeout=10)
    assert answer.status_code == 200, answer.text[:500]
    body = answer.json()
    assert body["subject"] == "carol" and "groups" not in body
    assert body["permissions"] == {"service:demo_web": ["read"]}
    assert json.loads(body["raw"][ACL_HEADER]) == CAROL_GRANTS


def test_whoami_direct_is_checked_like_any_path(stack: Stack) -> None:
    session = requests.Session()
    session.mount("http://", SourceAddress("127.0.0.2"))
    forged = session.get(f"{stack.service}/auth/whoami", timeout=10,
                         headers={**JSON_ACCEPT, "X-Forwarded-User": FORGED, SECRET_HEADER: SECRET})
    assert_unauthenticated(forged, "not from a trusted proxy")
    no_secret = requests.get(f"{stack.service}/auth/whoami", headers={**JSON_ACCEPT, "X-Forwarded-User": FORGED},
                             timeout=10)
    assert_unauthenticated(no_secret, "secret")
    proxied = requests.get(f"{stack.service}/auth/whoami", timeout=10,
                           headers={**JSON_ACCEPT, "X-Forwarded-User": "dave", SECRET_HEADER: SECRET})
    assert proxied.status_code == 200 and proxied.json()["subject"] == "dave"
