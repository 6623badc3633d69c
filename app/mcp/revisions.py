"""What differs between the protocol revisions the endpoint speaks, in one table of rules.

Handlers return results in their 2025 shape; :func:`shape_result` makes them what the request's revision
expects (2026-07-28: ``resultType`` on every result, ``ttlMs``/``cacheScope`` on cacheable ones, the
server's identity in ``_meta``; earlier revisions: none of those). Methods that exist in one family only
are refused in the other as unknown, so an SDK probing with ``server/discover`` on a handshake connection
(or ``ping`` on a stateless one) is told at once.
"""

from __future__ import annotations

from typing import Any

from app.mcp import registry
from app.version import VERSION

ALL_VERSIONS = registry.HANDSHAKE_VERSIONS + registry.MODERN_VERSIONS
BATCH_VERSIONS = frozenset({"2024-11-05", "2025-03-26"})   # JSON-RPC batches were removed in 2025-06-18
PRIMING_SINCE = "2025-11-25"                                # SSE priming events (older clients choke on them)

HANDSHAKE_ONLY = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                            "resources/unsubscribe"})
MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen"})
STREAMING = frozenset({"subscriptions/listen"})             # answered as an SSE stream

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
CACHE_TTL_MS = 0              # results change with the swarm: a client may keep one, never reuse it
CACHE_SCOPE = "private"       # answers depend on the caller's grants

# JSON-RPC error code → HTTP status on the stateless revision (the SDK's table); anything else is 200.
ERROR_STATUS = {registry.PARSE_ERROR: 400, registry.INVALID_REQUEST: 400, registry.INVALID_PARAMS: 400,
                registry.HEADER_MISMATCH: 400, registry.MISSING_CLIENT_CAPABILITY: 400,
                registry.UNSUPPORTED_PROTOCOL_VERSION: 400, registry.METHOD_NOT_FOUND: 404}
_LATER_FIELDS = ("resultType", "ttlMs", "cacheScope")


def server_info() -> dict[str, str]:
    return {"name": "shoal", "version": VERSION}


def capabilities(version: str) -> dict[str, Any]:
    """The server's capabilities as ``version`` names them (logging is a handshake-era capability,
    completions arrived in 2025-03-26)."""
    found: dict[str, Any] = {"resources": {"subscribe": True, "listChanged": True},
                             "tools": {"listChanged": False}}
    if version >= "2025-03-26":
        found["completions"] = {}
    if version in registry.HANDSHAKE_VERSIONS:
        found["logging"] = {}
    return found


def negotiate(offered: str) -> str:
    """The handshake answer: the client's revision when spoken here, else the latest handshake one."""
    return offered if offered in registry.HANDSHAKE_VERSIONS else registry.LATEST_HANDSHAKE


def exists_in(method: str, version: str) -> bool:
    if version in registry.MODERN_VERSIONS:
        return method not in HANDSHAKE_ONLY
    return method not in MODERN_ONLY


def shape_result(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    if version not in registry.MODERN_VERSIONS:
        if any(key in result for key in _LATER_FIELDS):
            result = {key: value for key, value in result.items() if key not in _LATER_FIELDS}
        return result
    shaped = dict(result)
    shaped.setdefault("resultType", "complete")
    if method in registry.CACHEABLE:
        shaped.setdefault("ttlMs", CACHE_TTL_MS)
        shaped.setdefault("cacheScope", CACHE_SCOPE)
    meta = shaped.get("_meta")
    shaped["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server_info()}
    return shaped


def unsupported_version(requested: str) -> registry.RpcError:
    return registry.RpcError(registry.UNSUPPORTED_PROTOCOL_VERSION, f"Unsupported protocol version: {requested[:64]}",
                             {"supported": list(ALL_VERSIONS), "requested": requested})


def modern_status(code: int) -> int:
    return ERROR_STATUS.get(code, 200)
