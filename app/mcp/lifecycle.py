"""The protocol's own methods: the handshake, discovery, ping, log level, cancellation and listen.

``initialize`` only computes the answer (the revision, capabilities, server identity); the transport opens
the session around it. ``subscriptions/listen`` only validates the filter and says which part of it is
honored; the transport turns that into the stream.
"""

from __future__ import annotations

import logging
from typing import Any

from app.mcp import resources, revisions
from app.mcp.registry import INVALID_PARAMS, CallContext, RpcError, method
from app.mcp.sessions import Session

log = logging.getLogger(__name__)

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@method("initialize")
def initialize(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    offered = params.get("protocolVersion")
    if not isinstance(offered, str):
        raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion (a string)")
    if not isinstance(params.get("capabilities", {}), dict):
        raise RpcError(INVALID_PARAMS, "params.capabilities must be an object")
    version = revisions.negotiate(offered)
    return {"protocolVersion": version, "capabilities": revisions.capabilities(version),
            "serverInfo": revisions.server_info(),
            "instructions": "Shoal: the state of a Docker Swarm (resources service://…) and tools that "
                            "operate it within the caller's grants."}


@method("notifications/initialized")
def initialized(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    if isinstance(ctx.session, Session):
        ctx.session.initialized = True
    return {}


@method("notifications/cancelled")
def cancelled(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    """Nothing to cancel: a request is answered within its own POST, so one that is still running cannot be
    reached from another request; the client drops the answer."""
    log.debug("mcp cancellation ignored", extra={"request_id": str(params.get("requestId"))[:64]})
    return {}


@method("ping")
def ping(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    return {}


@method("server/discover")
def discover(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    """Answered at once, without touching the cache: the SDK's auto mode waits for it before anything."""
    return {"supportedVersions": list(revisions.ALL_VERSIONS),
            "capabilities": revisions.capabilities(ctx.version)}


@method("logging/setLevel")
def set_level(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}")
    if isinstance(ctx.session, Session):
        ctx.session.log_level = level
    return {}


@method("subscriptions/listen")
def listen(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    """The honored part of the requested filter: resource list changes and resource subscriptions (tools
    never change while the server runs; there are no prompts)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise RpcError(INVALID_PARAMS, "subscriptions/listen needs params.notifications (an object)")
    uris = wanted.get("resourceSubscriptions") or []
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        raise RpcError(INVALID_PARAMS, "notifications.resourceSubscriptions must be a list of URIs")
    honored: dict[str, Any] = {}
    if wanted.get("resourcesListChanged") is True:
        honored["resourcesListChanged"] = True
    if uris:
        honored["resourceSubscriptions"] = resources.honor_subscriptions(ctx, uris)   # logs URIs: followers
    return {"notifications": honored}
