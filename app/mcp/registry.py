"""What the MCP parts share: the call context, JSON-RPC errors, the method table and the notification
subscribers.

Why one small module: the transport (sessions, streams, versions), the resources and the tools are separate
parts that meet only here. A handler takes the context and the request's ``params`` and returns the result
in its 2025 shape; the transport adds what a revision needs (``resultType``, ``ttlMs``/``cacheScope`` on
2026-07-28) and maps a raised :class:`RpcError` to the JSON-RPC error object (and the HTTP status of the
stateless revision). Handlers run inside the Flask request context of the ``POST /mcp`` that carried them,
so ``g.identity`` is the agent's identity and the REST layers work as for any request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from flask import Flask

from app.auth.identity import Identity

# Protocol revisions (the official SDK's lists): handshake revisions open a session with ``initialize``;
# the modern one is stateless (every request carries its version in ``params._meta``).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
LATEST_MODERN = MODERN_VERSIONS[-1]
DEFAULT_HEADERLESS_VERSION = "2025-03-26"   # a handshake request without MCP-Protocol-Version

# JSON-RPC 2.0 and MCP error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_LEGACY = -32002   # handshake revisions; the modern one uses INVALID_PARAMS
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
SERVER_BUSY = -32000                 # session cap reached (data.retryAfterSeconds)


class RpcError(Exception):
    """A JSON-RPC error answer: ``code``, a message for the agent, optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def error_object(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            body["data"] = self.data
        return body


class Session(Protocol):
    """A handshake session (``Mcp-Session-Id``) as handlers see it."""

    id: str
    identity: Identity
    version: str
    subscriptions: set[str]       # resource URIs subscribed with resources/subscribe


@dataclass(slots=True)
class CallContext:
    identity: Identity
    version: str                          # the revision this request speaks
    session: Session | None = None        # None on the stateless revision
    client_id: str | None = None          # the OAuth client of the bearer token, if any
    client_capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS


def resource_not_found(ctx: CallContext, uri: str) -> RpcError:
    """Hidden and absent read alike: the same error, naming only the URI the agent sent."""
    code = INVALID_PARAMS if ctx.modern else RESOURCE_NOT_FOUND_LEGACY
    return RpcError(code, f"Resource not found: {uri}", {"uri": uri})


Handler = Callable[[CallContext, dict[str, Any]], dict[str, Any]]
METHODS: dict[str, Handler] = {}
# Methods whose results clients may cache (2026-07-28 requires ttlMs and cacheScope on them).
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list",
                       "resources/read", "server/discover"})


def method(name: str) -> Callable[[Handler], Handler]:
    """Register the handler of one JSON-RPC method (modules register at import; app.mcp imports them)."""
    def register(handler: Handler) -> Handler:
        METHODS[name] = handler
        return handler
    return register


class Subscriber(Protocol):
    """Something that receives notifications: a handshake session's GET stream, or a 2026
    ``subscriptions/listen`` stream. ``notify`` never blocks (a full queue drops and returns False)."""

    identity: Identity
    list_changed: bool                    # wants notifications/resources/list_changed

    def wants(self, uri: str) -> bool: ...
    def notify(self, method: str, params: dict[str, Any]) -> bool: ...


_SUBSCRIBERS_KEY = "shoal.mcp.subscribers"


def subscribers(app: Flask) -> set[Subscriber]:
    """The live subscribers of this app (added and removed by the transport)."""
    found: set[Subscriber] = app.extensions.setdefault(_SUBSCRIBERS_KEY, set())
    return found
