"""``auth.mode = cert``: decoded certificates to identities (SPIFFE URI SAN > email SAN > CN, OU groups, DNs),
the provider on a request (401 AUT001 without a verified certificate), and :func:`verify_clients` in a real
in-memory TLS handshake with certificates openssl made (the decoded shape the provider reads is the real one).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.auth.cert import (
    NO_CERTIFICATE,
    CertProvider,
    distinguished_name,
    identity_from_certificate,
    peer_certificate,
    verify_clients,
)
from app.auth.identity import AuthenticationFailed
from tests.certs import Pair, TestCA
from tests.fakes import FakeEngine
from tests.unit.support import Harness, build_harness

ISSUER = ((("organizationName", "Shoal tests"),), (("commonName", "Shoal test CA"),))


def decoded(subject: tuple[tuple[tuple[str, str], ...], ...], sans: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """A certificate as ``SSLSocket.getpeercert()`` decodes it."""
    cert: dict[str, Any] = {"subject": subject, "issuer": ISSUER, "version": 3, "serialNumber": "1001",
                            "notBefore": "Nov 25 18:13:49 2026 GMT", "notAfter": "Nov 27 18:13:49 2026 GMT"}
    if sans:
        cert["subjectAltName"] = sans
    return cert


# --------------------------------------------------------------------------- mapping
def test_spiffe_uri_wins_over_email_and_cn() -> None:
    identity = identity_from_certificate(decoded(
        ((("organizationName", "Shoal"),), (("organizationalUnitName", "platform"),), (("commonName", "deployer"),)),
        (("DNS", "deployer.local"), ("email", "deployer@example.com"), ("URI", "https://example.com/x"),
         ("URI", "spiffe://shoal.test/ns/ops/sa/deployer"))))
    assert identity.subject == "spiffe://shoal.test/ns/ops/sa/deployer"
    assert identity.display_name == "deployer"
    assert identity.email == "deployer@example.com"
    assert identity.groups == ("platform",)
    assert identity.provider == "cert"
    assert not identity.anonymous and identity.grants == ()   # cert: policy only (docs/auth.md)


def test_email_san_is_the_subject_without_spiffe_and_every_ou_is_a_group() -> None:
    identity = identity_from_certificate(decoded(
        ((("organizationalUnitName", "engineering"),), (("organizationalUnitName", "ops"),),
         (("organizationalUnitName", "engineering"),), (("commonName", "Alice Example"),)),
        (("URI", "https://alice.example.com"), ("email", "alice@example.com"), ("email", "a@example.org"))))
    assert identity.subject == "alice@example.com"
    assert identity.email == "alice@example.com"
    assert identity.display_name == "Alice Example"
    assert identity.groups == ("engineering", "ops")     # in order, once each


def test_cn_is_the_subject_without_spiffe_or_email_sans() -> None:
    identity = identity_from_certificate(decoded(((("commonName", "bob"),),), (("DNS", "bob.example.com"),)))
    assert (identity.subject, identity.display_name, identity.email, identity.groups) == ("bob", "bob", None, ())


def test_a_subject_without_cn_shows_the_subject_as_display_name() -> None:
    identity = identity_from_certificate(decoded(((("organizationName", "Shoal"),),),
                                                 (("URI", "SPIFFE://shoal.test/job"),)))
    assert identity.subject == identity.display_name == "SPIFFE://shoal.test/job"


def test_a_certificate_naming_nobody_is_401() -> None:
    with pytest.raises(AuthenticationFailed) as failure:
        identity_from_certificate(decoded(((("organizationName", "Shoal"),),), (("DNS", "x.example.com"),)))
    assert failure.value.challenge is None
    assert "no subject" in failure.value.detail


def test_raw_holds_dns_serial_and_expiry_only() -> None:
    identity = identity_from_certificate(decoded(
        ((("countryName", "DE"),), (("organizationName", "Shoal, Inc."),), (("organizationalUnitName", "ops"),),
         (("commonName", "carol"),))))
    assert identity.raw == {"subjectDN": "CN=carol,OU=ops,O=Shoal\\, Inc.,C=DE",
                            "issuerDN": "CN=Shoal test CA,O=Shoal tests",
                            "serial": "1001", "notAfter": "Nov 27 18:13:49 2026 GMT"}
    assert identity.document()["raw"] == identity.raw


def test_distinguished_names_escape_and_keep_multi_valued_rdns() -> None:
    name = ((("domainComponent", "org"),), (("commonName", " lead#"), ("userId", "u+1")),
            (("emailAddress", "x@example.com"),))
    assert distinguished_name(name) == "emailAddress=x@example.com,CN=\\ lead#+UID=u\\+1,DC=org"
    assert distinguished_name(((("commonName", "#a "),),)) == "CN=\\#a\\ "


# --------------------------------------------------------------------------- provider
class FakeSocket:
    def __init__(self, cert: dict[str, Any] | None, error: Exception | None = None) -> None:
        self.cert, self.error = cert, error

    def getpeercert(self) -> dict[str, Any] | None:
        if self.error is not None:
            raise self.error
        return self.cert


ALICE = decoded(((("organizationalUnitName", "ops"),), (("commonName", "alice"),)))


@pytest.mark.parametrize("environ", [
    {},                                                    # not behind TLS at all
    {"gunicorn.socket": object()},                         # a plain socket
    {"gunicorn.socket": FakeSocket(None)},                 # TLS, no certificate sent
    {"shoal.socket": FakeSocket({})},                      # TLS, certificate not verified (CERT_NONE)
    {"gunicorn.socket": FakeSocket(ALICE, ValueError("not connected"))},
])
def test_no_verified_certificate_is_none(environ: dict[str, Any]) -> None:
    assert peer_certificate(environ) is None


def test_the_certificate_comes_from_either_servers_socket() -> None:
    assert peer_certificate({"gunicorn.socket": FakeSocket(ALICE)}) == ALICE
    assert peer_certificate({"shoal.socket": FakeSocket(ALICE)}) == ALICE


@pytest.fixture
def cert_app(fake_engine: FakeEngine) -> Iterator[Harness]:
    harness = build_harness(fake_engine, auth_mode="cert", cert_ca="/nonexistent/ca.pem")
    harness.start()
    yield harness
    harness.stop()


def test_the_app_answers_401_aut001_without_a_certificate(cert_app: Harness) -> None:
    client = cert_app.app.test_client()
    response = client.get("/cluster", headers={"Accept": "application/json"},
                          environ_base={"gunicorn.socket": FakeSocket(None)})
    assert response.status_code == 401
    assert response.content_type == "application/problem+json"
    problem = response.get_json()
    assert problem["type"].endswith("/api/errors/AUT001")
    assert problem["detail"] == NO_CERTIFICATE
    assert "WWW-Authenticate" not in response.headers          # no standard scheme for mTLS
    assert client.get("/-/health", environ_base={"gunicorn.socket": FakeSocket(None)}).status_code == 200


def test_the_app_serves_a_verified_certificate(cert_app: Harness) -> None:
    provider = CertProvider()
    with cert_app.app.test_request_context("/cluster", environ_base={"gunicorn.socket": FakeSocket(ALICE)}):
        from flask import request

        assert provider.authenticate(request).subject == "alice"
    response = cert_app.app.test_client().get("/cluster", headers={"Accept": "application/json"},
                                              environ_base={"gunicorn.socket": FakeSocket(ALICE)})
    assert response.status_code == 200, response.get_data(as_text=True)


# --------------------------------------------------------------------------- real handshakes
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("pki")
    ca, other = TestCA(base / "ca", "Shoal test CA"), TestCA(base / "other", "Other CA")
    return {"ca": ca,
            "server": ca.issue("server", "/CN=127.0.0.1", san="IP:127.0.0.1", server=True),
            "spiffe": ca.issue("spiffe", "/O=Shoal/OU=platform/CN=deployer",
                               san="URI:spiffe://shoal.test/ns/ops/sa/deployer,email:deployer@example.com"),
            "email": ca.issue("email", "/OU=engineering/OU=ops/CN=Alice Example", san="email:alice@example.com"),
            "stranger": other.issue("stranger", "/CN=mallory"),
            "expired": ca.issue("expired", "/CN=old", start="20200101000000Z", end="20200102000000Z"),
            "future": ca.issue("future", "/CN=soon", start="20400101000000Z", end="20400102000000Z"),
            "server-only": ca.issue("server-only", "/CN=web", san="DNS:web.example.com", server=True)}


def handshake(pki: dict[str, Any], client: Pair | None) -> dict[str, Any] | None:
    """A TLS handshake in memory between the server context ``shoal`` builds and a client presenting
    ``client``; the server side's ``getpeercert()``."""
    ca: TestCA = pki["ca"]
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*pki["server"].both)
    verify_clients(server_context, ca.cert)
    client_context = ssl.create_default_context(cafile=ca.cert)
    if client is not None:
        client_context.load_cert_chain(*client.both)
    bios = [ssl.MemoryBIO() for _ in range(4)]
    server = server_context.wrap_bio(bios[0], bios[1], server_side=True)
    peer = client_context.wrap_bio(bios[2], bios[3], server_hostname="127.0.0.1")
    done = [False, False]
    for _ in range(10):
        for index, side in enumerate((peer, server)):
            if not done[index]:
                try:
                    side.do_handshake()
                    done[index] = True
                except ssl.SSLWantReadError:
                    pass
        bios[0].write(bios[3].read())   # client → server
        bios[2].write(bios[1].read())   # server → client
        if all(done):
            break
    assert all(done), "the handshake did not finish"
    cert: dict[str, Any] | None = server.getpeercert()
    return cert


def test_a_verified_client_certificate_decodes_to_the_mapped_identity(pki: dict[str, Any]) -> None:
    cert = handshake(pki, pki["spiffe"])
    assert cert is not None
    identity = identity_from_certificate(cert)
    assert identity.subject == "spiffe://shoal.test/ns/ops/sa/deployer"
    assert (identity.display_name, identity.email, identity.groups) == ("deployer", "deployer@example.com",
                                                                        ("platform",))
    assert identity.raw is not None and identity.raw["subjectDN"] == "CN=deployer,OU=platform,O=Shoal"
    assert identity.raw["issuerDN"] == "CN=Shoal test CA,O=Shoal tests"
    email = identity_from_certificate(handshake(pki, pki["email"]) or {})
    assert (email.subject, email.groups) == ("alice@example.com", ("engineering", "ops"))


def test_no_client_certificate_completes_the_handshake_without_a_peer(pki: dict[str, Any]) -> None:
    assert handshake(pki, None) is None


@pytest.mark.parametrize("name", ["stranger", "expired", "future", "server-only"])
def test_a_certificate_of_another_ca_out_of_date_or_not_for_clients_fails_the_handshake(
        pki: dict[str, Any], name: str) -> None:
    with pytest.raises(ssl.SSLError) as failure:
        handshake(pki, pki[name])
    assert failure.value.reason in ("CERTIFICATE_VERIFY_FAILED", "TLSV1_ALERT_UNKNOWN_CA",
                                    "SSLV3_ALERT_CERTIFICATE_EXPIRED", "TLSV1_ALERT_DECRYPT_ERROR")


def test_verify_clients_loads_the_bundle(pki: dict[str, Any], tmp_path: Path) -> None:
    context = verify_clients(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), pki["ca"].cert)
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert context.cert_store_stats()["x509_ca"] == 1
    (tmp_path / "empty.pem").write_text("")
    with pytest.raises(ssl.SSLError):
        verify_clients(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), str(tmp_path / "empty.pem"))
