"""The bearer check of ``/mcp`` (stub: replaced by the authorization server's token verification)."""

from __future__ import annotations

from flask import Request

from app.auth.identity import ANONYMOUS, AuthenticationFailed
from app.oauth.caller import AgentCaller
from app.runtime import current_runtime


def authenticate_agent(request: Request) -> AgentCaller:
    """The agent calling ``/mcp``, or :class:`AuthenticationFailed` with the ``WWW-Authenticate`` challenge."""
    settings = current_runtime().settings
    if settings.auth_mode == "none":
        return AgentCaller(ANONYMOUS, None)
    raise AuthenticationFailed("A bearer token is required.", challenge='Bearer realm="mcp"')
