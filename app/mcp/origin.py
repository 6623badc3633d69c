"""The ``Origin`` check of ``/mcp`` (the defence against DNS rebinding the transport rules require).

A page of an attacker's site whose name was made to resolve to this service would otherwise reach the
endpoint with the browser's network position. Non-browser agents send no ``Origin`` and pass; a browser's
``Origin`` must be this service as the request reached it (scheme and host, through trusted proxies as
``app.http.links`` sees them), ``server.external_url``, ``mcp.issuer`` or one of ``server.cors.origins``.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from flask import Request

from app.config import Settings
from app.http.links import external_origin

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def normalized(url: str | None) -> str | None:
    """``scheme://host[:port]`` lower-cased, default port dropped; None for anything else."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and str(port) != _DEFAULT_PORTS[parts.scheme]:
        host += f":{port}"
    return f"{parts.scheme}://{host}"


class OriginCheck:
    def __init__(self, settings: Settings) -> None:
        self._as_seen = dataclasses.replace(settings, external_url=None)
        fixed = {normalized(settings.external_url), normalized(settings.mcp_issuer)}
        self.any_cors = tuple(settings.cors_origins) == ("*",)
        fixed |= {normalized(origin) for origin in settings.cors_origins}
        self.fixed = frozenset(origin for origin in fixed if origin)

    def allows(self, request: Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        if self.any_cors and origin != "null":
            return True
        wanted = normalized(origin)
        if wanted is None:
            return False
        return wanted in self.fixed or wanted == normalized(external_origin(self._as_seen, request))
