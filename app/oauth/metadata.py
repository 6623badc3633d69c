"""The discovery documents: authorization-server metadata (RFC 8414) and protected-resource metadata
(RFC 9728), both cacheable for an hour (docs/oauth.md, Discovery).

The MCP SDK client compares the metadata's ``issuer`` with the PRM's ``authorization_servers[0]`` as exact
strings and requires the PRM ``resource`` to share the origin of ``/mcp`` and prefix its path; both come
from the one :class:`~app.oauth.issuer.Issuer`, so they agree by construction.

Where they are served (routes are declared without ``server.base_path``; the base path shim adds it):
``/.well-known/oauth-authorization-server`` and ``/.well-known/openid-configuration`` (the same document;
with a base path the SDK finds it at ``<base>/.well-known/openid-configuration``, the third place it
tries, since RFC 8414's path-inserted ``/.well-known/oauth-authorization-server<base>`` lies outside the
base path), and ``/.well-known/oauth-protected-resource`` plus ``…/oauth-protected-resource/mcp``.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from app.oauth.server import OAuthServer, current_server

CACHE = "max-age=3600"


def authorization_server_metadata(server: OAuthServer) -> dict[str, Any]:
    base = server.issuer.url
    document: dict[str, Any] = {
        "issuer": base,
        "authorization_endpoint": f"{base}/oauth/authorize",
        "token_endpoint": f"{base}/oauth/token",
        "revocation_endpoint": f"{base}/oauth/revoke",
    }
    if server.settings.mcp_dcr_enabled:
        document["registration_endpoint"] = f"{base}/oauth/register"
    document.update({
        "client_id_metadata_document_supported": server.settings.mcp_cimd_enabled,
        "code_challenge_methods_supported": ["S256"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "response_types_supported": ["code"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": True,
    })
    return document


def protected_resource_metadata(server: OAuthServer) -> dict[str, Any]:
    issuer = server.issuer
    return {"resource": issuer.resource, "authorization_servers": [issuer.url],
            "bearer_methods_supported": ["header"], "resource_documentation": f"{issuer.url}/api"}


def _cached(document: dict[str, Any]) -> Response:
    response = jsonify(document)
    response.headers["Cache-Control"] = CACHE
    return response


def as_metadata() -> Response:
    return _cached(authorization_server_metadata(current_server()))


def pr_metadata() -> Response:
    return _cached(protected_resource_metadata(current_server()))
