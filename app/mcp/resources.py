"""The agent resources: ``resources/list``, ``resources/templates/list``, ``resources/read``,
``resources/subscribe`` and ``resources/unsubscribe`` (docs/agent-resources.md).

The lists are fixed (three static URIs, nine templates: ``app.mcp.uris``) and small, so they are never
paged. Reads are ``app.mcp.resource_read``. A subscription (handshake sessions only) needs a well-formed
URI naming an object that exists and that the caller may read now (else ``resource_not_found``, the same
answer for both); the session stores the canonical URI (the id in place of a name). A logs URI also starts
(or keeps) its service's log follower (``app.mcp.resource_logs``). Unsubscribing needs only a well-formed
URI: the object may be gone by then; both the URI as sent and its canonical form are dropped.
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from app.http.acl_read import may_read, require_grants
from app.mcp import resource_read, uris
from app.mcp.registry import INVALID_PARAMS, INVALID_REQUEST, CallContext, RpcError, method, resource_not_found
from app.mcp.resource_logs import FollowerLimit, follow_logs
from app.runtime import current_runtime


@method("resources/list")
def list_resources(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"resources": [{"uri": static.uri, "name": static.name, "title": static.title,
                           "description": static.description, "mimeType": uris.MIME}
                          for static in uris.STATICS]}


@method("resources/templates/list")
def list_templates(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"resourceTemplates": [{"uriTemplate": template.uri_template, "name": template.name,
                                   "title": template.title, "description": template.description,
                                   "mimeType": uris.MIME}
                                  for template in uris.TEMPLATES]}


def _uri_param(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RpcError(INVALID_PARAMS, "params.uri must be a non-empty string")
    return uri


@method("resources/read")
def read_resource(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    return resource_read.read(ctx, _uri_param(params))


def _session(ctx: CallContext) -> Any:
    if ctx.session is None:
        raise RpcError(INVALID_REQUEST, "resources/subscribe needs a session (initialize first); "
                                        "stateless requests use subscriptions/listen")
    return ctx.session


@method("resources/subscribe")
def subscribe(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    session = _session(ctx)
    uri = _uri_param(params)
    parsed = uris.parse(uri)
    if parsed is None:
        raise resource_not_found(ctx, uri)
    if parsed.static:
        _static_readable(ctx, parsed.uri)
        canonical = parsed.uri
    else:
        entry = resource_read.readable_entry(ctx, parsed)
        canonical = uris.canonical(parsed, entry)
        if parsed.logs:
            try:
                follow_logs(current_app._get_current_object(), entry.id)  # type: ignore[attr-defined]
            except FollowerLimit as exc:
                raise RpcError(INVALID_REQUEST, f"Cannot subscribe to {uri}: {exc}", {"uri": uri}) from None
    session.subscriptions.add(canonical)
    return {}


def _static_readable(ctx: CallContext, uri: str) -> None:
    """The static documents need at least one grant (as their REST reads), recommendations the engine
    turned on; checked without building the document."""
    if uri == uris.RECOMMENDATIONS and not current_runtime().settings.recommendations:
        raise resource_not_found(ctx, uri)
    with resource_read.refusals(ctx, uri):
        require_grants()


@method("resources/unsubscribe")
def unsubscribe(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    session = _session(ctx)
    uri = _uri_param(params)
    parsed = uris.parse(uri)
    if parsed is None:
        raise resource_not_found(ctx, uri)
    session.subscriptions.discard(parsed.uri)
    if not parsed.static and parsed.kind is not None:
        entry = uris.resolve(current_runtime().cache, parsed.kind, parsed.ref)
        if entry is not None:
            session.subscriptions.discard(uris.canonical(parsed, entry))
    return {}


def honor_subscriptions(ctx: CallContext, requested: list[str]) -> list[str]:
    """The part of a 2026 ``subscriptions/listen`` filter's ``resourceSubscriptions`` this server honours:
    the well-formed ``service://`` URIs, as sent (notifications carry both the id and the name form). A logs
    URI of a service the caller may read now also starts its follower; one beyond the follower cap is not
    honoured. For the transport's listen handler (a listen stream does not pass through
    ``resources/subscribe``)."""
    honored: list[str] = []
    for uri in dict.fromkeys(requested):
        parsed = uris.parse(uri)
        if parsed is None:
            continue
        if parsed.logs and parsed.kind is not None:
            entry = uris.resolve(current_runtime().cache, parsed.kind, parsed.ref)
            if entry is not None and may_read(entry):
                try:
                    follow_logs(current_app._get_current_object(), entry.id)  # type: ignore[attr-defined]
                except FollowerLimit:
                    continue
        honored.append(uri)
    return honored


def init(app: Any) -> None:
    """Start-up wiring of the resource parts: the notifier and the log followers."""
    from app.mcp import notifications, resource_logs
    resource_logs.init(app, notifications.init(app))
