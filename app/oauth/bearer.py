"""The bearer check of ``/mcp`` (docs/oauth.md, Bearer tokens).

- Auth mode ``none``: anonymous, no token.
- An ``Authorization: Bearer`` token: an access token of this server (HS256 with the signing key; ``iss``,
  ``aud`` = the canonical ``/mcp`` URL, ``exp``, ``iat``). The identity is the token's subject and groups,
  provider ``oauth``; the caller's client is the token's ``client_id``. The token is never passed on.
- No token, and the mode is listed in ``mcp.oauth.auth_bypass`` (``cert``): that mode's own identity.
- Anything else: :class:`AuthenticationFailed` whose challenge is ``Bearer realm="mcp",
  resource_metadata="<issuer>/.well-known/oauth-protected-resource"`` (plus ``error="invalid_token"``
  when a token was presented), which starts the agent's OAuth flow.
"""

from __future__ import annotations

from flask import Request, current_app

from app.auth.identity import ANONYMOUS, AuthenticationFailed, Identity, LoginRequired, ProviderRefused
from app.oauth.caller import AgentCaller
from app.oauth.server import maybe_server
from app.oauth.tokens import TokenRejected
from app.runtime import current_runtime


def challenge(resource_metadata: str, *, invalid: bool) -> str:
    value = f'Bearer realm="mcp", resource_metadata="{resource_metadata}"'
    return value + ', error="invalid_token"' if invalid else value


def authenticate_agent(request: Request) -> AgentCaller:
    """The agent calling ``/mcp``, or :class:`AuthenticationFailed` with the ``WWW-Authenticate`` challenge."""
    settings = current_runtime().settings
    if settings.auth_mode == "none":
        return AgentCaller(ANONYMOUS, None)
    server = maybe_server(current_app)
    if server is None:   # the app was built without its authorization server: nothing can verify a token
        raise AuthenticationFailed("The agent endpoint's authorization server is not running.",
                                   challenge='Bearer realm="mcp"')
    metadata_url = server.issuer.resource_metadata
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if not header:
        if settings.auth_mode in settings.mcp_auth_bypass:
            return _bypass(request, metadata_url)
        raise AuthenticationFailed("A bearer token is required.", challenge=challenge(metadata_url, invalid=False))
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationFailed("The Authorization header must be 'Bearer <access token>'.",
                                   challenge=challenge(metadata_url, invalid=True))
    try:
        claims = server.access_tokens().verify(token.strip())
    except TokenRejected as exc:
        raise AuthenticationFailed(f"The bearer token is not accepted: {exc.reason}.",
                                   challenge=challenge(metadata_url, invalid=True)) from None
    identity = Identity(subject=claims.subject, display_name=claims.subject, provider="oauth", groups=claims.groups)
    return AgentCaller(identity, claims.client_id)


def _bypass(request: Request, metadata_url: str) -> AgentCaller:
    """The configured mode's identity (e.g. the client certificate), accepted here without a token."""
    from app.http.auth import provider_of

    try:
        identity = provider_of(current_app).authenticate(request)
    except (AuthenticationFailed, ProviderRefused, LoginRequired) as exc:
        detail = exc.detail if isinstance(exc, AuthenticationFailed) else "no identity from the auth mode"
        raise AuthenticationFailed(f"{detail}; or present a bearer token.",
                                   challenge=challenge(metadata_url, invalid=False)) from None
    return AgentCaller(identity, None)
