"""``auth.mode = cert`` against the real counterpart: gunicorn (and ``shoal``) terminating TLS with client
certificate verification, asked by ``requests`` presenting certificates openssl made for the test.

Good certificates are served and their mapped subject (SPIFFE URI SAN > email SAN > CN) is the identity the
writes audit records; without a certificate the answer is 401 ``AUT001`` (``/-/health`` stays open); a
certificate of another CA or an expired one fails the TLS handshake (no HTTP answer), and the server goes on
serving and logs one line per refused connection, no traceback.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.certs import Pair, TestCA
from tests.conftest import OPENAPI, REPO, free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for

pytestmark = pytest.mark.integration
TIMEOUT = 10
SPIFFE_ID = "spiffe://shoal.test/ns/ops/sa/deployer"


@dataclass(frozen=True)
class Pki:
    ca: str                       # the auth.cert.ca bundle, also what clients verify the server with
    server: Pair
    clients: dict[str, Pair]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    base = tmp_path_factory.mktemp("mtls")
    ca, other = TestCA(base / "ca", "Shoal test CA"), TestCA(base / "other", "Other CA")
    return Pki(ca.cert, ca.issue("server", "/CN=127.0.0.1", san="IP:127.0.0.1,DNS:localhost", server=True), {
        "spiffe": ca.issue("spiffe", "/O=Shoal/OU=platform/CN=deployer",
                           san=f"URI:{SPIFFE_ID},email:deployer@example.com"),
        "email": ca.issue("email", "/OU=engineering/OU=ops/CN=Alice Example", san="email:alice@example.com"),
        "cn": ca.issue("cn", "/O=Shoal/CN=bob"),
        "stranger": other.issue("stranger", "/OU=ops/CN=mallory", san="email:mallory@example.com"),
        "expired": ca.issue("expired", "/OU=ops/CN=old", san="email:old@example.com",
                            start="20200101000000Z", end="20200102000000Z"),
    })


def mtls_env(docker_host: str, port: int, pki: Pki, state: Path) -> dict[str, str]:
    return gunicorn_env(docker_host, port, SERVICE_TLS_CERT=pki.server.cert, SERVICE_TLS_KEY=pki.server.key,
                        SERVICE_AUTH_MODE="cert", SERVICE_AUTH_CERT_CA=pki.ca, SERVICE_OPERATIONS_LEVEL="3",
                        SERVICE_DATA_DIR=str(state))


@dataclass(frozen=True)
class Served:
    base: str
    log: Path


@pytest.fixture(scope="module")
def gunicorn_mtls(docker_host: str, pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    port, directory = free_port(), tmp_path_factory.mktemp("gunicorn-mtls")
    base, log = f"https://127.0.0.1:{port}", directory / "server.log"
    with pytest.MonkeyPatch.context() as patch:   # the shared readiness probe verifies with the default bundle
        patch.setenv("REQUESTS_CA_BUNDLE", pki.ca)
        proc = launch_gunicorn(mtls_env(docker_host, port, pki, directory / "state"), log, base)
    yield Served(base, log)
    stop_gunicorn(proc, log)     # exit 0, no traceback in the log (refused handshakes included)


def get(served: Served, pki: Pki, path: str, client: str | None = None, **kwargs: Any) -> requests.Response:
    cert = pki.clients[client].both if client else None
    return requests.get(f"{served.base}{path}", cert=cert, verify=pki.ca, timeout=TIMEOUT,
                        headers={"Accept": "application/json"}, **kwargs)


# --------------------------------------------------------------------------- gunicorn
@pytest.mark.parametrize("client", ["spiffe", "email", "cn"])
def test_a_verified_client_certificate_is_served(gunicorn_mtls: Served, pki: Pki, client: str) -> None:
    response = get(gunicorn_mtls, pki, "/cluster", client)
    assert response.status_code == 200, response.text
    assert response.json()["@type"] == "Cluster"
    assert {"Authorization", "Cookie"} <= {v.strip() for v in response.headers["Vary"].split(",")}


def test_no_client_certificate_is_401_aut001(gunicorn_mtls: Served, pki: Pki) -> None:
    response = get(gunicorn_mtls, pki, "/cluster")
    assert response.status_code == 401
    assert response.headers["Content-Type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"].endswith("/api/errors/AUT001") and problem["status"] == 401
    assert problem["detail"] == "client certificate required"
    assert "WWW-Authenticate" not in response.headers          # mTLS has no standard challenge
    assert get(gunicorn_mtls, pki, "/services").status_code == 401
    assert get(gunicorn_mtls, pki, "/-/health").status_code == 200   # probes need no certificate


@pytest.mark.parametrize("client", ["stranger", "expired"])
def test_a_certificate_of_another_ca_or_expired_fails_the_handshake(gunicorn_mtls: Served, pki: Pki,
                                                                    client: str) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        get(gunicorn_mtls, pki, "/cluster", client)
    wait_for(lambda: "TLS connection failed" in gunicorn_mtls.log.read_text(), 5, message="the refusal logged")
    assert get(gunicorn_mtls, pki, "/cluster", "cn").status_code == 200   # the worker goes on serving


def test_the_mapped_subject_is_the_audited_identity_of_a_write(gunicorn_mtls: Served, pki: Pki,
                                                               engine: Any) -> None:
    """Through the writes audit (history ``audit.identity``): SPIFFE URI SAN > email SAN > CN."""
    expected = {"spiffe": SPIFFE_ID, "email": "alice@example.com", "cn": "bob"}
    made: list[str] = []
    try:
        for client, subject in expected.items():
            name = f"t-authcert-{client}-{uuid.uuid4().hex[:8]}"
            response = requests.post(f"{gunicorn_mtls.base}/configs", cert=pki.clients[client].both, verify=pki.ca,
                                     timeout=TIMEOUT, json={"name": name, "data": base64.b64encode(b"x").decode()})
            assert response.status_code == 201, response.text
            config_id = response.json()["config"]["ID"]
            made.append(config_id)
            response = requests.put(f"{gunicorn_mtls.base}/configs/{config_id}/labels", cert=pki.clients[client].both,
                                    verify=pki.ca, timeout=TIMEOUT, json={"labels": {"by": client}})
            assert response.status_code == 200, response.text   # an update: audited (a create has no id yet)

            def audited(config_id: str = config_id, client: str = client) -> list[dict[str, Any]]:
                items = get(gunicorn_mtls, pki, f"/history?type=config&resourceId={config_id}", client).json()["items"]
                return [item for item in items if item.get("audit")]

            entries = wait_for(audited, TIMEOUT, message=f"the audited label change of {name}")
            assert entries[0]["audit"]["identity"] == subject   # type: ignore[index]
    finally:
        for config_id in made:
            engine.remove_config(config_id)


def test_whoami_shows_the_mapped_identity(gunicorn_mtls: Served, pki: Pki) -> None:
    """``/auth/whoami`` (docs/auth.md): subject, display name, email, OU groups and the DNs."""
    body = get(gunicorn_mtls, pki, "/auth/whoami", "spiffe").json()
    assert (body["subject"], body["displayName"], body["provider"]) == (SPIFFE_ID, "deployer", "cert")
    assert body["email"] == "deployer@example.com" and body["groups"] == ["platform"]
    assert body["raw"]["subjectDN"] == "CN=deployer,OU=platform,O=Shoal"
    assert body["raw"]["issuerDN"] == "CN=Shoal test CA,O=Shoal tests"
    assert set(body["raw"]) == {"subjectDN", "issuerDN", "serial", "notAfter"}
    email = get(gunicorn_mtls, pki, "/auth/whoami", "email").json()
    assert (email["subject"], email["groups"]) == ("alice@example.com", ["engineering", "ops"])
    bob = get(gunicorn_mtls, pki, "/auth/whoami", "cn").json()
    assert (bob["subject"], bob["displayName"]) == ("bob", "bob") and "email" not in bob and "groups" not in bob
    assert get(gunicorn_mtls, pki, "/auth/whoami").status_code == 401


# --------------------------------------------------------------------------- shoal
def test_shoal_verifies_client_certificates_the_same_way(docker_host: str, pki: Pki, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "shoal.log"
    base = f"https://127.0.0.1:{port}"
    OPENAPI.bases.add(base)
    served = Served(base, log)
    env = mtls_env(docker_host, port, pki, tmp_path / "state")
    with log.open("wb") as sink:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "shoal")], cwd=REPO, env=env,
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            assert proc.poll() is None, f"shoal exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            return get(served, pki, "/-/ready").status_code == 200

        wait_for(ready, 30, interval=0.2, message="shoal readiness")
        assert get(served, pki, "/cluster", "email").status_code == 200
        response = get(served, pki, "/cluster")
        assert response.status_code == 401 and response.json()["type"].endswith("/api/errors/AUT001")
        for refused in ("stranger", "expired"):
            with pytest.raises(requests.exceptions.SSLError):
                get(served, pki, "/cluster", refused)
        assert get(served, pki, "/cluster", "spiffe").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)
    output = log.read_text()
    assert "Traceback" not in output, output[-4000:]
    assert "TLS connection failed" in output
    assert os.environ.get("REQUESTS_CA_BUNDLE") != pki.ca   # the fixture's patch did not leak
