"""``auth.mode = cert``: mutual TLS; the identity is the client certificate the TLS layer has verified.

The server (gunicorn or ``shoal``) asks for a client certificate with ``CERT_OPTIONAL`` and the
``auth.cert.ca`` bundle (:func:`verify_clients`): a presented certificate that does not chain to the bundle,
is expired or is not valid for client authentication fails the TLS handshake itself, so the app never sees
it. A client without a certificate completes the handshake and gets a 401 ``AUT001`` problem from the app
(``CERT_REQUIRED`` would close the connection with no HTTP answer at all, and would lock probes out of
``/-/health``). There is no standard ``WWW-Authenticate`` scheme for mTLS, so the 401 carries none.

Mapping (docs/auth.md, cert): subject = the first ``spiffe://`` URI SAN, else the first email SAN, else the
subject CN; display name = CN (else the subject); email = the first email SAN; groups = the subject's
OU values in order. Provider grants: none (a certificate carries none: policy only). ``raw`` holds the subject
and issuer DNs, the serial and notAfter: names and dates only, never key material.

The certificate is read from the WSGI environ's client socket (``gunicorn.socket`` under gunicorn's
gevent worker, ``shoal.socket`` under ``shoal``, both SSL sockets): ``getpeercert()`` answers the decoded
certificate only when it was verified, and nothing (``None``/``{}``) otherwise, so a server that was not
told to verify clients gives 401s, never an unverified identity.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from flask import Flask, Request

from app.auth.identity import AuthenticationFailed, Identity
from app.config import Settings
from app.http.peer import client_socket

NO_CERTIFICATE = "client certificate required"
NO_SUBJECT = "the client certificate names no subject (no SPIFFE URI or email SAN, no CN)"

# RFC 4514 short names; other attributes keep the name Python's ssl module gives them.
_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "countryName": "C",
          "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
          "domainComponent": "DC", "userId": "UID"}


def verify_clients(context: ssl.SSLContext, ca_file: str) -> ssl.SSLContext:
    """Ask TLS clients for a certificate and verify a presented one against ``ca_file`` (the ``shoal``
    server's context; gunicorn gets the same through ``cert_reqs``/``ca_certs``)."""
    context.load_verify_locations(cafile=ca_file)
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _rdns(name: Iterable[Iterable[tuple[str, str]]]) -> list[tuple[str, str]]:
    return [(attribute, value) for rdn in name for attribute, value in rdn]


def _escape(value: str) -> str:
    """RFC 4514 §2.4 escaping of an attribute value."""
    out = "".join("\\" + char if char in ',+"\\<>;' else char for char in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(name: Iterable[Iterable[tuple[str, str]]]) -> str:
    """``ssl``'s decoded name (RDN sequences, as encoded) as an RFC 4514 string (last RDN first)."""
    return ",".join("+".join(f"{_SHORT.get(attribute, attribute)}={_escape(value)}" for attribute, value in rdn)
                    for rdn in reversed([tuple(rdn) for rdn in name]))


def identity_from_certificate(cert: Mapping[str, Any]) -> Identity:
    """The Identity of a verified certificate as ``SSLSocket.getpeercert()`` decodes it."""
    subject_rdns = _rdns(cert.get("subject", ()))
    sans = list(cert.get("subjectAltName", ()))
    spiffe = next((value for kind, value in sans if kind == "URI" and value.lower().startswith("spiffe://")), None)
    email = next((value for kind, value in sans if kind == "email" and value), None)
    common_name = next((value for attribute, value in subject_rdns if attribute == "commonName" and value), None)
    subject = spiffe or email or common_name
    if not subject:
        raise AuthenticationFailed(NO_SUBJECT)
    groups = tuple(dict.fromkeys(value for attribute, value in subject_rdns
                                 if attribute == "organizationalUnitName" and value))
    raw = {"subjectDN": distinguished_name(cert.get("subject", ())),
           "issuerDN": distinguished_name(cert.get("issuer", ())),
           "serial": str(cert.get("serialNumber", "")), "notAfter": str(cert.get("notAfter", ""))}
    return Identity(subject=subject, display_name=common_name or subject, provider="cert", email=email,
                    groups=groups, raw=raw)


def peer_certificate(environ: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The verified client certificate of the request's connection, or None (plain socket, none sent)."""
    sock = client_socket(environ)
    getpeercert = getattr(sock, "getpeercert", None)
    if getpeercert is None:
        return None
    try:
        cert = getpeercert()
    except (ValueError, OSError):   # not connected any more, or no handshake
        return None
    return cert or None


class CertProvider:
    mode = "cert"

    def authenticate(self, request: Request) -> Identity:
        cert = peer_certificate(request.environ)
        if cert is None:
            raise AuthenticationFailed(NO_CERTIFICATE)
        return identity_from_certificate(cert)

    def init_app(self, app: Flask) -> None:
        return None


def make_provider(settings: Settings) -> CertProvider:
    return CertProvider()
