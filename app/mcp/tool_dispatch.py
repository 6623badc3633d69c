"""Run a write tool as its REST request, through the app's own view: one write path for HTTP and agents.

Why a full dispatch and not a call into the write code: the REST view is the write (level, ACL, target,
body, bounds, If-Match, engine call, audit, read-back, dry run); calling it the way HTTP does keeps the two
from drifting. The inner request gets a fresh application context, so the outer ``POST /mcp``'s ``g``
(its write operation, idempotency claim, access, request id) neither leaks in nor is changed; it carries
over only who calls: ``g.identity`` (so ``app.http.auth.authenticate_now`` does not authenticate again), the
OAuth client (``g.mcp_client_id``), the tool's name (``g.mcp_tool``, for the audit stamp) and the agents'
level (``g.tool_level``: ``app.http.writes.begin`` gates on it instead of the server's). The inner request
carries the outer one's ``Request-Id``, so the audit names the ``/mcp`` request the agent sent. It never
reaches gunicorn, so the access log shows only the ``POST /mcp``. The ``POST /mcp`` gives the admission gate
up while the write waits on the engine (as the exempt REST write views never hold it); a ticket the inner
request took anyway is released here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flask import current_app, g, request
from werkzeug.test import EnvironBuilder

from app.http import admission, respond
from app.http.request_id import HEADER as REQUEST_ID
from app.http.request_id import current_request_id
from app.mcp.tool_table import RestCall
from app.resources import ResourceKind
from app.runtime import current_runtime

INTERNAL_KEY = "shoal.mcp.internal"   # set in the inner request's environ: a tool's REST request


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any                       # the decoded JSON body, or None
    detail: dict[str, Any] | None   # after a 2xx write: the object as its detail shows it now (else None)


def _environ(call: RestCall) -> dict[str, Any]:
    data = None
    headers = {"Accept": "application/json", REQUEST_ID: current_request_id()}
    if call.body is not None:
        data = json.dumps(call.body, separators=(",", ":")).encode()
        headers["Content-Type"] = call.content_type
    builder = EnvironBuilder(path=call.path, base_url=request.host_url.rstrip("/") + request.script_root,
                             method=call.method, data=data, headers=list(headers.items()),
                             query_string=call.query or None)
    try:
        environ = builder.get_environ()
    finally:
        builder.close()
    for key in ("REMOTE_ADDR", "REMOTE_PORT", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO"):
        if key in request.environ:   # the peer as the outer request saw it (trusted proxies)
            environ[key] = request.environ[key]
    environ[INTERNAL_KEY] = True
    return environ


def run(call: RestCall, *, tool: str, level: int, answers: tuple[ResourceKind, str] | None = None) -> Answer:
    """The REST answer of ``call`` made by the current agent; ``answers`` = (kind, id) of the object whose
    detail a successful write answers (read from the cache, which the write's read-back updated)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    identity, client = g.get("identity"), g.get("mcp_client_id")
    environ = _environ(call)
    with admission.released(), app.app_context(), app.request_context(environ):   # waits on the engine
        g.identity = identity
        g.mcp_client_id = client
        g.mcp_tool = tool
        g.tool_level = level
        try:
            response = app.full_dispatch_request()
        finally:
            ticket = environ.pop(admission._TICKET_KEY, None)
            if isinstance(ticket, admission.Ticket):
                ticket.release()
        try:
            data = response.get_data()
        finally:
            response.close()
        body = _decoded(data, response.mimetype or "")
        detail = None
        if answers is not None and 200 <= response.status_code < 300 and not _is_dry_run(body):
            detail = _detail(*answers)
    return Answer(response.status_code, body, detail)


def _decoded(data: bytes, mimetype: str) -> Any:
    if not data or not (mimetype.endswith("json") or mimetype.endswith("+json")):
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _is_dry_run(body: Any) -> bool:
    return isinstance(body, dict) and body.get("dryRun") is True


def _detail(kind: ResourceKind, object_id: str) -> dict[str, Any] | None:
    entry = current_runtime().cache.get(kind, object_id)
    if entry is None:
        return None
    body = json.loads(respond.detail(entry).get_data())
    found = body.get(kind.spec.detail_key)
    return found if isinstance(found, dict) else None
