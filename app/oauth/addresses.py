"""Address rules of the OAuth client endpoints: which resolved addresses a client-metadata document may be
fetched from, which hosts a plain-http redirect URI may name, and which address a registration counts
against (the per-IP limit).

- :func:`public_only` is the fetch policy: an address inside the service's own networks (private,
  loopback, link-local, carrier-grade NAT, unspecified, multicast, reserved, IPv6 unique-local and
  link-local, and the IPv4-mapped and NAT64 forms of those) is refused, so a ``client_id`` URL cannot make
  the service reach into its own network.
- :func:`client_address` is the registering client: the peer, or, when the peer is one of
  ``server.trusted_proxies``, the right-most ``X-Forwarded-For`` entry that is not itself a trusted proxy
  (entries left of it are written by the client and prove nothing).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# A fetch policy: the reason an address may not be connected to, or None when it may.
AddressPolicy = Callable[[IPAddress], str | None]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "[::1]", "localhost"})   # plain http redirect URIs only to these
MAX_FORWARDED_HOPS = 32   # X-Forwarded-For entries looked at, from the right
MAX_REDIRECT_URI = 2000   # characters of one redirect URI

_V4_REFUSED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "an unspecified ('this network') address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol assignment address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved or broadcast address"),
)
_V6_REFUSED: tuple[tuple[str, str], ...] = (
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible address"),
    ("fc00::/7", "a unique-local address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
)
_REFUSED: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why) for cidr, why in (*_V4_REFUSED, *_V6_REFUSED))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def public_only(address: IPAddress) -> str | None:
    """Why ``address`` must not be fetched from (``"a loopback address"``), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
                                           if address in _NAT64 else None)
        if embedded is not None:
            why = public_only(embedded)
            return None if why is None else f"{why} (in IPv6 form)"
    for network, why in _REFUSED:
        if address.version == network.version and address in network:
            return why
    return None


def parse_address(text: str | None) -> IPAddress | None:
    """An IP address written alone (brackets and a zone id tolerated), else None."""
    value = (text or "").strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    try:
        return ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None


@lru_cache(maxsize=8)
def _networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in proxies)


def _trusted(address: IPAddress | None, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address.version == net.version and address in net for net in networks)


def client_address(environ: Mapping[str, Any], trusted_proxies: tuple[str, ...]) -> str:
    """The client a request counts against: the peer, or what a trusted proxy says in ``X-Forwarded-For``
    (walked from the right, past further trusted proxies; a malformed entry stops the walk there)."""
    peer_text = str(environ.get("REMOTE_ADDR") or "")
    peer = parse_address(peer_text)
    networks = _networks(trusted_proxies)
    if not _trusted(peer, networks):
        return str(peer) if peer is not None else peer_text
    client = peer
    hops = str(environ.get("HTTP_X_FORWARDED_FOR") or "").split(",")[-MAX_FORWARDED_HOPS:]
    for hop in reversed(hops):
        address = parse_address(hop)
        if address is None:
            break
        client = address
        if not _trusted(address, networks):
            break
    return str(client)


def loopback_host(host: str) -> bool:
    """``host`` (as written in a URL's authority, without the port) names this machine's loopback."""
    return host.lower() in LOOPBACK_HOSTS


def redirect_uri_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be a client's redirect URI, or None: an absolute ``https`` URL, or ``http`` to a
    loopback host (a native client's local listener); no fragment, no user name or password."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    if len(uri) > MAX_REDIRECT_URI or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in uri):
        return f"a redirect URI must be at most {MAX_REDIRECT_URI} characters without spaces or control characters"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return f"{uri!r} is not a valid URL"
    scheme, host = parts.scheme.lower(), _authority_host(parts.netloc)
    if scheme not in ("https", "http") or not host:
        return f"{uri!r} must be an absolute https URL (or http to 127.0.0.1, [::1] or localhost)"
    if scheme == "http" and not loopback_host(host):
        return f"{uri!r}: plain http is allowed only to a loopback host (127.0.0.1, [::1], localhost)"
    if "#" in uri:
        return f"{uri!r} must not contain a fragment"
    if "@" in parts.netloc:
        return f"{uri!r} must not contain a user name or password"
    return None


def _authority_host(netloc: str) -> str:
    """The host of an authority as written (IPv6 keeps its brackets), without user info or port."""
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else ""
    return host.partition(":")[0]
