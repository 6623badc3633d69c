"""Mode ``headers``: the identity a trusted reverse proxy puts in request headers (docs/auth.md, headers).

Anyone can send ``X-Forwarded-User``; what makes the header worth believing is who sent it. A request is
believed only when its TCP peer (the WSGI ``REMOTE_ADDR``: under gunicorn the socket's peer, never a
forwarded address) falls in ``server.trusted_proxies`` when that list is set, and carries the shared secret
header when one is configured; with both configured both must hold. Anything else is 401 ``AUT001`` and
its identity headers are neither used nor logged.

``X-Forwarded-For`` plays no part in the trust decision; it only names the client in the refusal log of a
request that came through a trusted proxy.

Identity header values are strict UTF-8, trimmed of SP/HTAB only, and refused (401) when they hold a
control, format or non-HTTP whitespace character (``app.auth.header_values``): ``admin`` + NBSP never
becomes ``admin``.

The 401 challenge: no standard scheme describes "come through the proxy", and RFC 9110 §11.6.1 asks every
401 to carry at least one challenge, so the mode answers ``WWW-Authenticate: Proxy realm="shoal"``. Clients
ignore a scheme they do not know (a browser shows the problem page, no password dialog: a ``Basic``
challenge would make it send a password this mode never reads); the proxy's own challenge, e.g. nginx's
``auth_basic``, is what users meet first.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from typing import Any, NoReturn

from flask import Flask, Request

from app.acl.policy import parse_provider_grants
from app.auth.header_values import OWS, UnsafeHeaderValue, decoded, identity_text
from app.auth.identity import AuthenticationFailed, Identity, ProviderGrant
from app.config import ConfigError, Settings

log = logging.getLogger(__name__)

CHALLENGE = 'Proxy realm="shoal"'
MAX_SUBJECT = 256          # the subject header holds at most 256 characters
MAX_VALUE = 1024           # name, email, one group: longer values are dropped, not truncated
MAX_FORWARDED_HOPS = 32    # X-Forwarded-For entries looked at (logging only)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_address(text: str | None) -> Address | None:
    """An IP address (IPv4-mapped IPv6 as IPv4, so ``::ffff:127.0.0.1`` matches ``127.0.0.1/32``), or None
    for anything else (a unix socket peer, garbage)."""
    if not text:
        return None
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _within(text: str | None, limit: int) -> str | None:
    """Empty or over-long optional values are dropped (not truncated)."""
    return text if text and len(text) <= limit else None


def parse_groups(text: str | None) -> tuple[str, ...]:
    """Comma-separated groups (checked text, ``app.auth.header_values``), each trimmed of SP/HTAB; empty
    or over-long ones dropped, duplicates once."""
    if not text:
        return ()
    groups = (part.strip(OWS) for part in text.split(","))
    return tuple(dict.fromkeys(group for group in groups if group and len(group) <= MAX_VALUE))


def parse_grants(value: str | None, header: str) -> tuple[ProviderGrant, ...]:
    """The provider grants header (docs/acl.md, Provider grants): a JSON array of ``{resources, permissions}``, decoded
    by the policy's own grammar (invalid entries dropped one by one). A value that is not a JSON array
    gives no grants and a warning that names the header, never the value."""
    if value is None or not value.strip(OWS):
        return ()
    try:
        document = json.loads(value)
    except (ValueError, RecursionError):   # a deeply nested array is no grant list either (not a 500)
        document = None
    if not isinstance(document, list):
        log.warning("provider grants header %s is not a JSON array: ignored (no grants)", header,
                    extra={"header": header})
        return ()
    grants = parse_provider_grants(document)
    if len(grants) < len(document):
        log.debug("provider grants header %s: %d invalid entries dropped", header, len(document) - len(grants),
                 extra={"header": header, "dropped": len(document) - len(grants)})
    return grants


class HeadersProvider:
    """Believes the identity headers of requests from a trusted proxy (and/or with the shared secret)."""

    mode = "headers"

    def __init__(self, settings: Settings) -> None:
        self.secret_header = settings.headers_secret_header
        self._secret = (settings.headers_secret_value.encode("utf-8")
                        if settings.headers_secret_header and settings.headers_secret_value else None)
        secret = (self.secret_header or "").lower()
        if not settings.headers_subject or settings.headers_subject.lower() == secret:
            raise ConfigError("auth.mode = headers needs auth.headers.subject, a header other than the secret's")
        self.networks: tuple[Network, ...] = tuple(ipaddress.ip_network(cidr)
                                                   for cidr in settings.trusted_proxies)
        self.subject = settings.headers_subject
        # the secret never feeds the identity: an optional header named like it is not read at all
        self.name, self.email, self.groups, self.grants_header = (
            None if header and header.lower() == secret else header
            for header in (settings.headers_name, settings.headers_email, settings.headers_groups,
                           settings.acl_headers_acl))
        if secret and secret in {(h or "").lower() for h in (settings.headers_name, settings.headers_email,
                                                                settings.headers_groups, settings.acl_headers_acl)}:
            log.warning("auth.headers: an identity header is also the secret header %s: it is not read",
                        self.secret_header)
        identity_headers = (self.subject, self.name, self.email, self.groups, self.grants_header)
        self.raw_headers = tuple(dict.fromkeys(h for h in identity_headers if h))

    def init_app(self, app: Flask) -> None:
        return None

    # ------------------------------------------------------------------ trust
    def trusted_address(self, address: Address | None) -> bool:
        """In ``server.trusted_proxies``; any peer when the list is empty (the secret alone decides)."""
        if not self.networks:
            return True
        if address is None:
            return False
        return any(address.version == net.version and address in net for net in self.networks)

    def secret_matches(self, request: Request) -> bool:
        if self._secret is None:
            return True
        sent = request.headers.get(self.secret_header or "")
        if sent is None:
            return False
        try:
            given = sent.encode("latin-1")
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(given, self._secret)

    def forwarded_client(self, request: Request) -> str | None:
        """The client a trusted proxy reports in ``X-Forwarded-For``: the right-most address that is not
        itself a trusted proxy. For logs only; call it only once the peer is trusted."""
        hops = request.headers.get("X-Forwarded-For", "").split(",")[-MAX_FORWARDED_HOPS:]
        for hop in reversed(hops):
            address = parse_address(hop)
            if address is None:
                return None
            if not (self.networks and self.trusted_address(address)):
                return str(address)
        return None

    # ------------------------------------------------------------------ identity
    def authenticate(self, request: Request) -> Identity:
        peer = request.environ.get("REMOTE_ADDR")
        if not self.trusted_address(parse_address(peer)):
            self._refuse("not from a trusted proxy", peer)
        if not self.secret_matches(request):
            self._refuse("the proxy's shared secret header is missing or wrong", peer)
        subject = self._text(request, self.subject, peer)
        if not subject or len(subject) > MAX_SUBJECT:
            problem = "missing or empty" if not subject else "longer than 256 characters"
            self._refuse(f"the subject header {self.subject} is {problem}", peer, self.forwarded_client(request))
        name, email = (_within(self._text(request, header, peer), MAX_VALUE) for header in (self.name, self.email))
        groups = parse_groups(self._text(request, self.groups, peer))
        grants = parse_grants(self._text(request, self.grants_header, peer, tabs=True), self.grants_header or "")
        raw = {header: decoded(value) for header in self.raw_headers
               if (value := request.headers.get(header)) is not None}   # every one checked above
        return Identity(subject=subject, display_name=name or subject, provider="headers", email=email,
                        groups=groups, raw=raw, grants=grants)

    def _text(self, request: Request, header: str | None, peer: str | None, *, tabs: bool = False) -> str | None:
        """A configured identity header's checked text (``app.auth.header_values``), None when unset or
        absent; 401 naming the header (never the value) when it is not UTF-8 or holds an unprintable
        character (``tabs``: HTAB allowed inside, the grants header's JSON whitespace)."""
        value = request.headers.get(header) if header else None
        if value is None:
            return None
        try:
            return identity_text(value, tabs=tabs)
        except UnsafeHeaderValue:
            self._refuse(f"the identity header {header} is not UTF-8 or holds a control, format or non-HTTP "
                         "whitespace character", peer, self.forwarded_client(request))

    def _refuse(self, reason: str, peer: str | None, client: str | None = None) -> NoReturn:
        """401 AUT001. The log names the peer (and the forwarded client of a trusted proxy), never a header
        value: a refused request's identity headers are forged or broken."""
        extra: dict[str, Any] = {"auth_mode": "headers", "peer": peer or "unknown"}
        if client:
            extra["client"] = client
        log.info("authentication refused: %s (peer %s)", reason, peer or "unknown", extra=extra)
        raise AuthenticationFailed(f"Authentication failed: {reason}.", CHALLENGE)


def make_provider(settings: Settings) -> HeadersProvider:
    return HeadersProvider(settings)
