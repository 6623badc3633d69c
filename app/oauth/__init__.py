"""The OAuth 2.1 authorization server of the agent endpoint (auth mode other than ``none``; docs/oauth.md).

``init_oauth`` registers the discovery documents, ``/oauth/authorize``, ``/oauth/token``, ``/oauth/revoke``
and client registration (``app.oauth.registration``), and warns when agents' tokens would travel without
TLS.
"""

from __future__ import annotations

import logging

from flask import Flask

log = logging.getLogger(__name__)


def init_oauth(app: Flask) -> None:
    from app.oauth.authorize import authorize
    from app.oauth.metadata import as_metadata, pr_metadata
    from app.oauth.registration import init_registration
    from app.oauth.revocation import revoke
    from app.oauth.server import make_server
    from app.oauth.token_endpoint import token

    server = make_server(app)
    for path in _well_known("oauth-authorization-server", server.issuer.path) + \
            _well_known("openid-configuration", server.issuer.path):
        app.add_url_rule(path, endpoint=f"oauth_as_metadata:{path}", view_func=as_metadata, methods=["GET"])
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        app.add_url_rule(path, endpoint=f"oauth_pr_metadata:{path}", view_func=pr_metadata, methods=["GET"])
    app.add_url_rule("/oauth/authorize", endpoint="oauth_authorize", view_func=authorize, methods=["GET", "POST"])
    app.add_url_rule("/oauth/token", endpoint="oauth_token", view_func=token, methods=["POST"])
    app.add_url_rule("/oauth/revoke", endpoint="oauth_revoke", view_func=revoke, methods=["POST"])
    init_registration(app)   # the client registry; POST /oauth/register when mcp.oauth.dcr_enabled
    settings = server.settings
    if not settings.tls_enabled and not server.issuer.secure:
        log.warning("the agent endpoint's OAuth server runs without TLS: tokens and codes travel in clear text "
                    "(serve over TLS, or behind an https proxy named in mcp.issuer)",
                    extra={"issuer": server.issuer.url})
    if server.issuer.derived:
        log.info("the OAuth issuer is derived from the listen address; set mcp.issuer if agents reach the "
                 "service by another name", extra={"issuer": server.issuer.url})


def _well_known(name: str, issuer_path: str) -> list[str]:
    """The document at the origin's root and, for an issuer with a path, RFC 8414's path-inserted form
    (reachable when a proxy maps the root's well-known paths onto the service)."""
    paths = [f"/.well-known/{name}"]
    if issuer_path:
        paths.append(f"/.well-known/{name}{issuer_path}")
    return paths

