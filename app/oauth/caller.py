"""Who is calling ``/mcp``: the contract between the MCP transport and the authorization server."""

from __future__ import annotations

from dataclasses import dataclass

from app.auth.identity import Identity


@dataclass(frozen=True, slots=True)
class AgentCaller:
    identity: Identity
    client_id: str | None      # the OAuth client the token was issued to (None: no token, e.g. mode none)
