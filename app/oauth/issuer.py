"""The authorization server's issuer and the canonical address of ``/mcp`` (docs/oauth.md, Issuer).

Both are fixed for the life of the process: tokens carry them (``iss``, ``aud``) and the MCP SDK client
compares them as exact strings, so they never come from a request's ``Host`` header.

The issuer is ``mcp.issuer`` + ``server.base_path``; else ``server.external_url`` + base path; else
derived from the listen address (``https`` with TLS, ``localhost`` for a wildcard address or a unix socket:
set ``mcp.issuer`` whenever agents reach the service by another name).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from app.config import Settings

_WILDCARDS = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True, slots=True)
class Issuer:
    url: str            # no trailing slash; holds the base path
    derived: bool       # neither mcp.issuer nor server.external_url: guessed from the listen address

    @property
    def resource(self) -> str:
        """The canonical URL of the agent endpoint (the tokens' ``aud``, the PRM ``resource``)."""
        return self.url + "/mcp"

    @property
    def resource_metadata(self) -> str:
        return self.url + "/.well-known/oauth-protected-resource"

    @property
    def path(self) -> str:
        """The issuer's path ('' at the origin's root): RFC 8414 inserts it after the well-known name."""
        return urlsplit(self.url).path.rstrip("/")

    @property
    def secure(self) -> bool:
        return self.url.startswith("https://")


def issuer_of(settings: Settings) -> Issuer:
    base = settings.mcp_issuer or settings.external_url
    if base:
        return Issuer(base.rstrip("/") + settings.base_path, derived=False)
    return Issuer(_listen_origin(settings) + settings.base_path, derived=True)


def _listen_origin(settings: Settings) -> str:
    scheme = "https" if settings.tls_enabled else "http"
    listen = settings.listen_addr
    if listen.is_unix or listen.host in _WILDCARDS:
        host = "localhost"
    else:
        host = f"[{listen.host}]" if listen.is_ipv6 else listen.host
    default_port = 443 if scheme == "https" else 80
    port = "" if listen.is_unix or listen.port == default_port else f":{listen.port}"
    return f"{scheme}://{host.lower()}{port}"
