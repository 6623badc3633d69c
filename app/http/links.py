"""RFC 8288 Link headers (discovery links on every response, the Atom alternate, paging relations) and the
absolute URLs of documents that have no base URL (JSON Feed).

``external_origin`` is where clients reach the service: ``server.external_url`` when configured (behind a
proxy that rewrites the host, the one reliable answer), else the request's own scheme and ``Host``, with
``X-Forwarded-Proto`` / ``X-Forwarded-Host`` believed only from a peer in ``server.trusted_proxies`` (the
addresses the trusted-proxy logic of ``app.auth.headers`` trusts; an empty list trusts no one here). A
malformed host gives ``None``: the caller keeps its paths rather than echo the header.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from functools import lru_cache

from flask import Request

from app.auth.headers import Network, parse_address
from app.config import Settings

_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+(?::\d{1,5})?"
                   r"|\[[0-9A-Fa-f:.]{2,45}\](?::\d{1,5})?")


def link(target: str, rel: str, media_type: str | None = None) -> str:
    value = f'<{target}>; rel="{rel}"'
    if media_type:
        value += f'; type="{media_type}"'
    return value


def discovery_links(base_path: str) -> list[str]:
    return [link(f"{base_path}/api", "service-desc", "application/openapi+json"),
            link(f"{base_path}/api/context.jsonld", "describedby", "application/ld+json")]


def join(values: Iterable[str]) -> str:
    return ", ".join(values)



def external_origin(settings: Settings, request: Request) -> str | None:
    """Scheme, host (and a proxy's path prefix) of the service's root as the client sees it, without a
    trailing ``/``; paths (which already hold ``server.base_path``) are appended to it."""
    if settings.external_url:
        return settings.external_url
    scheme, host = request.scheme, request.host
    if _from_trusted_proxy(settings.trusted_proxies, request.remote_addr):
        scheme = _first(request.headers.get("X-Forwarded-Proto")) or scheme
        host = _first(request.headers.get("X-Forwarded-Host")) or host
    if scheme not in ("http", "https") or not _HOST.fullmatch(host or ""):
        return None
    return f"{scheme}://{host}"


def absolute(origin: str | None, path: str) -> str:
    """``path`` (absolute, under the base path) on ``origin``; the path itself when there is none."""
    return origin + path if origin is not None and path.startswith("/") else path


def _first(value: str | None) -> str:
    """The first (client-facing) value of a comma-separated forwarding header."""
    return (value or "").split(",", 1)[0].strip().lower()


def _from_trusted_proxy(proxies: tuple[str, ...], peer: str | None) -> bool:
    address = parse_address(peer)
    return address is not None and any(address.version == net.version and address in net
                                       for net in _networks(proxies))


@lru_cache(maxsize=4)
def _networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in proxies)
