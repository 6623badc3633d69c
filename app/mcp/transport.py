"""``/mcp``: the streamable-HTTP transport of the agent endpoint (one view; POST, GET, DELETE).

Order of every request: the ``Origin`` check (403), the bearer check (``app.oauth.bearer``: 401 with its
challenge), then ``g.identity`` / ``g.mcp_client_id`` are set, so the ACL and the write layer see the agent
as they see any caller. Then the revision decides the rest:

- a request whose ``MCP-Protocol-Version`` (or, without that header, whose ``params._meta``) names the
  stateless 2026-07-28 revision is served alone: its routing headers must agree with its body (-32020),
  every result carries ``resultType`` (and the cache fields where the revision requires them), errors map to
  HTTP statuses as the SDKs do, GET and DELETE are 405;
- anything else is a handshake request (2024-11-05 … 2025-11-25): ``initialize`` opens a session, every
  later request names it with ``Mcp-Session-Id`` (missing: 400, unknown or another subject's: 404) and
  repeats its revision in ``MCP-Protocol-Version`` (another one: 400); GET opens the session's notification
  stream, DELETE ends it; batches only for sessions of 2024-11-05 and 2025-03-26.

Every answer is JSON (a JSON-RPC object, an array for a batch) or an event stream, never a page: the view
catches everything, logs unexpected failures with their traceback and answers -32603 with the request id.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, request

from app.auth.identity import AuthenticationFailed, Identity
from app.http.admission import released, streaming
from app.http.peer import client_socket
from app.http.request_id import current_request_id
from app.mcp import registry, revisions, wire
from app.mcp.origin import OriginCheck
from app.mcp.registry import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_BUSY,
    CallContext,
    RpcError,
)
from app.mcp.sessions import Listener, Session, StreamBusy, stream_body, table_of
from app.oauth import bearer
from app.runtime import runtime_of

log = logging.getLogger(__name__)

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
SSE = "text/event-stream"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}   # nginx must not buffer a stream
BUSY_RETRY_SECONDS = 5
_CHECK_KEY = "shoal.mcp.origin"

blp = Blueprint("mcp", __name__)


class _Answer(Exception):
    """A finished answer raised from deep inside the flow (an error with its HTTP status)."""

    def __init__(self, response: Response) -> None:
        self.response = response


def init_transport(app: Flask) -> None:
    app.extensions[_CHECK_KEY] = OriginCheck(runtime_of(app).settings)
    app.register_blueprint(blp)
    app.before_request(_other_methods)


def _other_methods() -> Response | None:
    """PUT, PATCH, … on ``/mcp``: 405 as JSON-RPC (before Flask's routing error, which would be a problem)."""
    if request.path == "/mcp" and request.method not in ("GET", "HEAD", "POST", "DELETE", "OPTIONS"):
        return _error(405, RpcError(INVALID_REQUEST, f"Method {request.method[:16]} not allowed"),
                      headers={"Allow": "GET, POST, DELETE"})
    return None


# ------------------------------------------------------------------------------------------ answers
def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(wire.encode(body), status=status, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _error(status: int, error: RpcError, request_id: str | int | None = None,
           headers: dict[str, str] | None = None) -> Response:
    return _json(wire.error_body(request_id, error), status, headers)


def _fail(status: int, code: int, message: str, request_id: str | int | None = None, data: Any = None,
          headers: dict[str, str] | None = None) -> _Answer:
    return _Answer(_error(status, RpcError(code, message, data), request_id, headers))


def _accepts_only_sse() -> bool:
    accept = request.accept_mimetypes
    return accept.provided and SSE in accept.values() and accept.quality("application/json") == 0 \
        and "*/*" not in accept.values() and "application/*" not in accept.values()


def _answer(version: str, body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A single JSON-RPC answer: JSON, or one SSE event for a client that accepts only event streams."""
    if status != 200 or not _accepts_only_sse():
        return _json(body, status, headers)
    first = wire.priming(0) if version >= revisions.PRIMING_SINCE else b""
    response = Response(first + wire.event(wire.encode(body)), mimetype=SSE, headers=STREAM_HEADERS)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


# --------------------------------------------------------------------------------------------- view
@blp.route("/mcp", methods=["GET", "POST", "DELETE"])
@streaming   # gated while the answer is made; a stream's body runs outside the gate
def endpoint() -> Response:
    try:
        if not current_app.extensions[_CHECK_KEY].allows(request):
            return _error(403, RpcError(INVALID_REQUEST, "Forbidden: this Origin may not use the endpoint"))
        try:
            caller = bearer.authenticate_agent(request)
        except AuthenticationFailed as failure:
            headers = {"WWW-Authenticate": failure.challenge} if failure.challenge else None
            return _error(401, RpcError(INVALID_REQUEST, f"Unauthorized: {failure.detail}"), headers=headers)
        g.identity = caller.identity
        g.mcp_client_id = caller.client_id
        if request.method == "POST":
            return _post(caller.identity, caller.client_id)
        if request.method in ("GET", "HEAD"):
            return _get(caller.identity)
        return _delete(caller.identity)
    except _Answer as answer:
        return answer.response
    except Exception:
        log.exception("mcp request failed", extra={"method": request.method})
        return _error(500, RpcError(INTERNAL_ERROR, "Internal error", {"requestId": current_request_id()}))


# ----------------------------------------------------------------------------------- handshake side
def _version_header() -> str | None:
    value = request.headers.get(VERSION_HEADER)
    return value.strip() if value is not None else None


def _session(identity: Identity, header: str | None, request_id: str | int | None = None) -> Session:
    """The session the request names, checked: 400 without the header, 404 unknown, 400 on another revision."""
    session_id = request.headers.get(SESSION_HEADER)
    if not session_id:
        raise _fail(400, INVALID_REQUEST, "Bad Request: Missing session ID", request_id)
    session = table_of(current_app).find(session_id.strip(), identity)
    if session is None:
        raise _fail(404, INVALID_REQUEST, "Session not found", request_id)
    if header is not None and header != session.version:
        raise _fail(400, INVALID_REQUEST, f"Bad Request: {VERSION_HEADER} {header[:64]} is not this session's "
                                          f"revision ({session.version})", request_id)
    return session


def _stateless(header: str | None) -> bool:
    if header is not None and header not in registry.HANDSHAKE_VERSIONS:
        if header not in registry.MODERN_VERSIONS:
            raise _Answer(_error(400, revisions.unsupported_version(header)))
        return True
    return False


def _handshake_session(identity: Identity, why_not: str) -> Session:
    """The session a GET or DELETE names; 405 on the stateless revision (it has neither)."""
    header = _version_header()
    if _stateless(header):
        raise _Answer(_error(405, RpcError(INVALID_REQUEST, f"Method Not Allowed: {why_not}"),
                             headers={"Allow": "POST"}))
    return _session(identity, header)


def _get(identity: Identity) -> Response:
    session = _handshake_session(identity, "no GET stream at this revision")
    if request.method == "HEAD":
        return Response(b"", mimetype=SSE, headers=STREAM_HEADERS)
    table = table_of(current_app)
    try:
        stream, first = session.open_stream(_last_event_id())
    except StreamBusy:
        return _error(409, RpcError(INVALID_REQUEST, "Conflict: this session's GET stream is already open"))
    if table.stopping:
        stream.end()
    return _stream_response(stream_body(stream, first, table.keepalive, client_socket(request.environ),
                                        lambda: session.close_stream(stream)), lambda: session.close_stream(stream))


def _stream_response(body: Iterator[bytes], close: Callable[[], None]) -> Response:
    """An SSE answer whose cleanup also runs when its body never started (the body's own ``finally`` does
    not run then); ``close`` is idempotent."""
    response = Response(body, mimetype=SSE, headers=STREAM_HEADERS)
    response.call_on_close(close)
    return response


def _last_event_id() -> str | None:
    value = request.headers.get("Last-Event-ID")
    return value.strip() if value and value.strip() else None


def _delete(identity: Identity) -> Response:
    session = _handshake_session(identity, "no sessions at this revision")
    table_of(current_app).end(session, "deleted")
    return Response(status=204)


# --------------------------------------------------------------------------------------------- POST
def _read_body() -> bytes:
    limit = runtime_of(current_app).settings.mcp_max_body_bytes
    too_large = _fail(413, INVALID_REQUEST, f"Request body larger than {limit} bytes")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    with released():   # a slow upload must not hold the admission gate
        body = request.stream.read(limit + 1)
    if len(body) > limit:
        raise too_large
    return body


def _post(identity: Identity, client_id: str | None) -> Response:
    raw = _read_body()
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return _error(400, RpcError(PARSE_ERROR, "Parse error"))
    header = _version_header()
    if _stateless(header) or (header is None and _envelope_version(body) in registry.MODERN_VERSIONS):
        return _post_modern(identity, client_id, body, header)
    return _post_handshake(identity, client_id, body, header)


def _envelope_version(body: Any) -> Any:
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(revisions.PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None


def _body_id(body: Any) -> str | int | None:
    value = body.get("id") if isinstance(body, dict) else None
    return value if wire.valid_id(value) else None


def _post_handshake(identity: Identity, client_id: str | None, body: Any, header: str | None) -> Response:
    if isinstance(body, list):
        return _batch(identity, client_id, body, header)
    try:
        message = wire.parse_message(body)
    except RpcError as error:
        return _error(400, error, _body_id(body))
    if isinstance(message, wire.Request) and message.method == "initialize" and not message.is_notification:
        return _initialize(identity, client_id, message)
    session = _session(identity, header, _body_id(body))
    answer = _handle(identity, client_id, session, message)
    if answer is None:
        return Response(status=202)
    return _answer(session.version, answer)


def _batch(identity: Identity, client_id: str | None, items: list[Any], header: str | None) -> Response:
    if not items:
        return _error(400, RpcError(INVALID_REQUEST, "Invalid Request: empty batch"))
    session = _session(identity, header)
    if session.version not in revisions.BATCH_VERSIONS:
        return _error(400, RpcError(INVALID_REQUEST, f"Invalid Request: no JSON-RPC batches at {session.version}"))
    answers: list[dict[str, Any]] = []
    for item in items:
        try:
            message = wire.parse_message(item)
        except RpcError as error:
            answers.append(wire.error_body(_body_id(item), error))
            continue
        if isinstance(message, wire.Request) and message.method == "initialize":
            answers.append(wire.error_body(message.id, RpcError(INVALID_REQUEST,
                                                                "Invalid Request: initialize cannot be batched")))
            continue
        answer = _handle(identity, client_id, session, message)
        if answer is not None:
            answers.append(answer)
    return _json(answers) if answers else Response(status=202)


def _handle(identity: Identity, client_id: str | None, session: Session,
            message: wire.Message) -> dict[str, Any] | None:
    """One message of a session: the JSON-RPC answer of a request, None for a notification or response."""
    ctx = CallContext(identity, session.version, session, client_id, session.client_capabilities)
    if isinstance(message, wire.ClientResponse):
        return None
    if message.is_notification:
        _notify(ctx, message)
        return None
    try:
        result = _call(ctx, message)
    except RpcError as error:
        return wire.error_body(message.id, error)
    return wire.result_body(message.id, revisions.shape_result(message.method, session.version, result))


def _notify(ctx: CallContext, message: wire.Request) -> None:
    handler = registry.METHODS.get(message.method)
    if handler is None or not message.method.startswith("notifications/"):
        return   # unknown notifications are ignored (JSON-RPC: no answer to give)
    try:
        handler(ctx, message.params)
    except Exception:
        log.exception("mcp notification handler failed", extra={"rpc_method": message.method[:64]})


def _call(ctx: CallContext, message: wire.Request) -> dict[str, Any]:
    handler = registry.METHODS.get(message.method)
    if handler is None or message.method.startswith("notifications/") \
            or not revisions.exists_in(message.method, ctx.version):
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {message.method[:100]}")
    try:
        result = handler(ctx, message.params)
    except RpcError:
        raise
    except Exception:
        log.exception("mcp method failed", extra={"rpc_method": message.method[:64]})
        raise RpcError(INTERNAL_ERROR, "Internal error", {"requestId": current_request_id()}) from None
    if not isinstance(result, dict):
        log.error("mcp method returned no object", extra={"rpc_method": message.method[:64]})
        raise RpcError(INTERNAL_ERROR, "Internal error", {"requestId": current_request_id()})
    return result


def _initialize(identity: Identity, client_id: str | None, message: wire.Request) -> Response:
    ctx = CallContext(identity, revisions.negotiate(str(message.params.get("protocolVersion"))), None, client_id)
    try:
        result = _call(ctx, message)
    except RpcError as error:
        return _error(400 if error.code == INVALID_PARAMS else 200, error, message.id)
    capabilities = message.params.get("capabilities")
    client = message.params.get("clientInfo")
    client_name = client.get("name") if isinstance(client, dict) else None
    table = table_of(current_app)
    session = table.create(identity, result["protocolVersion"], capabilities if isinstance(capabilities, dict) else {},
                           client_name[:100] if isinstance(client_name, str) else None)
    if session is None:
        retry = _busy_retry_seconds()
        return _error(503, RpcError(SERVER_BUSY, f"Too many sessions ({table.max_sessions}); retry later",
                                    {"retryAfterSeconds": retry}), message.id, {"Retry-After": str(retry)})
    return _json(wire.result_body(message.id, result), headers={SESSION_HEADER: session.id})


def _busy_retry_seconds() -> int:
    """Seconds until the longest-idle session expires (bounded to 1 … 3600); the cap frees a place then."""
    table = table_of(current_app)
    idle = [s.last_used for s in table.sessions.values() if s.stream is None]
    if not idle:
        return BUSY_RETRY_SECONDS
    return int(min(3600, max(1, min(idle) + table.idle_ttl - time.monotonic() + 1)))


# ----------------------------------------------------------------------------------- stateless side
def _modern_error(error: RpcError, request_id: str | int | None, headers: dict[str, str] | None = None) -> Response:
    return _error(revisions.modern_status(error.code), error, request_id, headers)


def _post_modern(identity: Identity, client_id: str | None, body: Any, header: str | None) -> Response:
    if not isinstance(body, dict):
        return _modern_error(RpcError(INVALID_REQUEST, "Body must be a single JSON-RPC request or notification "
                                                       "object"), None)
    try:
        message = wire.parse_message(body)
    except RpcError as error:
        return _modern_error(error, _body_id(body))
    if isinstance(message, wire.ClientResponse):
        return _modern_error(RpcError(INVALID_REQUEST, "Body must be a single JSON-RPC request or notification "
                                                       "object"), None)
    if message.is_notification:
        return Response(status=202)   # no client notifications at this revision: acknowledged, dropped
    try:
        version, capabilities = _check_envelope(message, header)
        ctx = CallContext(identity, version, None, client_id, capabilities)
        if message.method in revisions.STREAMING and message.method in registry.METHODS:
            return _listen(ctx, message)
        result = _call(ctx, message)
    except RpcError as error:
        return _modern_error(error, message.id)
    return _answer(version, wire.result_body(message.id, revisions.shape_result(message.method, version, result)))


def _check_envelope(message: wire.Request, header: str | None) -> tuple[str, dict[str, Any]]:
    """The revision and client capabilities of a stateless request, after its headers agree with its body."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict) or revisions.PROTOCOL_VERSION_KEY not in meta \
            or revisions.CLIENT_CAPABILITIES_KEY not in meta:
        raise RpcError(INVALID_PARAMS, f"params._meta must carry {revisions.PROTOCOL_VERSION_KEY} and "
                                       f"{revisions.CLIENT_CAPABILITIES_KEY}")
    version = meta[revisions.PROTOCOL_VERSION_KEY]
    for name in (VERSION_HEADER, METHOD_HEADER, NAME_HEADER):
        if len(request.headers.getlist(name)) > 1:
            raise RpcError(registry.HEADER_MISMATCH, f"{name} header appears more than once")
    if header is None or header != version:
        raise RpcError(registry.HEADER_MISMATCH, f"{VERSION_HEADER} header does not match params._meta")
    if request.headers.get(METHOD_HEADER) != message.method:
        raise RpcError(registry.HEADER_MISMATCH, f"{METHOD_HEADER} header does not match the method")
    name_key = revisions.NAME_BEARING.get(message.method)
    if name_key is not None:
        value = message.params.get(name_key)
        if value is not None and wire.decode_header_value(request.headers.get(NAME_HEADER)) != value:
            raise RpcError(registry.HEADER_MISMATCH, f"{NAME_HEADER} header does not match params.{name_key}")
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, "the protocol version in params._meta must be a string")
    if version not in registry.MODERN_VERSIONS:
        raise revisions.unsupported_version(version)
    capabilities = meta[revisions.CLIENT_CAPABILITIES_KEY]
    return version, capabilities if isinstance(capabilities, dict) else {}


def _listen(ctx: CallContext, message: wire.Request) -> Response:
    """``subscriptions/listen``: the acknowledgement, then the notifications, on this POST's event stream;
    ended by the server (worker stop) with the final result, by the client by going away."""
    assert message.id is not None
    honored = _call(ctx, message)["notifications"]
    listener = Listener(ctx.identity, message.id, bool(honored.get("resourcesListChanged")),
                        frozenset(honored.get("resourceSubscriptions", ())))
    table = table_of(current_app)
    if not table.add_listener(listener):
        return _error(503, RpcError(SERVER_BUSY, "Too many listen streams; retry later",
                                    {"retryAfterSeconds": BUSY_RETRY_SECONDS}), message.id,
                      {"Retry-After": str(BUSY_RETRY_SECONDS)})
    if table.stopping:
        listener.stream.end()
    ack = wire.notification_body("notifications/subscriptions/acknowledged",
                                 {"notifications": honored, "_meta": listener.meta})
    first = wire.priming(0) + wire.event(wire.encode(ack))
    final = wire.event(wire.encode(wire.result_body(message.id, revisions.shape_result(
        message.method, ctx.version, {"_meta": listener.meta}))))
    return _stream_response(stream_body(listener.stream, first, table.keepalive, client_socket(request.environ),
                                        lambda: table.remove_listener(listener), lambda: final),
                            lambda: table.remove_listener(listener))
