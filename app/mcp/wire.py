"""The bytes of the agent endpoint: JSON-RPC 2.0 messages in, JSON-RPC answers and SSE frames out.

Why one module: every answer of ``/mcp`` (a plain JSON body, an error with a ``null`` id, an SSE event on
the GET stream or a listen stream) is composed here, so the framing rules live in one place: compact JSON
(never a raw line break, so ``data:`` is always one line), events without a name (the clients handle only
the default ``message`` event), an ``id`` only where a stream can be resumed from it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from app.mcp.registry import INVALID_REQUEST, RpcError

JSONRPC = "2.0"
RETRY_MS = 3000
RETRY = b"retry: %d\n\n" % RETRY_MS          # the reconnection delay a client keeps for the stream
KEEPALIVE = b":keepalive\n\n"
CLOSING = b":closing\nretry: %d\n\n" % RETRY_MS   # the last bytes of a stream the server ends
_B64_SENTINEL = re.compile(r"=\?base64\?(?P<payload>[A-Za-z0-9+/]*={0,2})\?=")


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------ messages
@dataclass(frozen=True, slots=True)
class Request:
    """A request (``id`` set) or a notification (``id`` None) from the client."""

    method: str
    params: dict[str, Any]
    id: str | int | None

    @property
    def is_notification(self) -> bool:
        return self.id is None


@dataclass(frozen=True, slots=True)
class ClientResponse:
    """A client's answer to a server→client request: acknowledged (202), nothing else to do."""

    id: str | int | None


Message = Request | ClientResponse


def valid_id(value: Any) -> bool:
    """JSON-RPC ids here are strings or integers (MCP forbids ``null``; booleans are not numbers)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_message(value: Any) -> Message:
    """One JSON-RPC object, or :class:`RpcError` -32600 (its ``data.id`` keeps a usable request id)."""
    if not isinstance(value, dict) or value.get("jsonrpc") != JSONRPC:
        raise RpcError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 object")
    if "method" not in value:
        if ("result" in value) != ("error" in value) and ("id" in value):
            return ClientResponse(value["id"] if valid_id(value["id"]) else None)
        raise RpcError(INVALID_REQUEST, "Invalid Request: no method")
    method = value["method"]
    has_id = "id" in value
    request_id = value.get("id")
    if has_id and not valid_id(request_id):
        raise RpcError(INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "Invalid Request: the method must be a non-empty string",
                       {"id": request_id} if has_id else None)
    params = value.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: params must be an object",
                       {"id": request_id} if has_id else None)
    return Request(method, params, request_id if has_id else None)


def result_body(request_id: str | int | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error_body(request_id: str | int | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "error": error.error_object()}


def notification_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "method": method, "params": params}


# --------------------------------------------------------------------------------------------- SSE
def event(data: bytes, event_id: int | str | None = None) -> bytes:
    """One SSE event (default name ``message``); ``data`` is compact JSON: no line break to split."""
    if event_id is None:
        return b"data: " + data + b"\n\n"
    return b"id: " + str(event_id).encode() + b"\ndata: " + data + b"\n\n"


def priming(event_id: int | str) -> bytes:
    """The priming event (an id and empty data): the client's resumption point before any message, and the
    reconnection delay. Only for clients at 2025-11-25 or later (older ones cannot parse empty data)."""
    return b"id: " + str(event_id).encode() + b"\nretry: %d\ndata: \n\n" % RETRY_MS


# ------------------------------------------------------------------------------------------ headers
def decode_header_value(value: str | None) -> str | None:
    """``Mcp-Name`` as sent: verbatim, or the UTF-8 text inside ``=?base64?…?=``; a malformed sentinel is
    None (it must never match a body value by accident)."""
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
    except binascii.Error:
        return None
    if base64.b64encode(decoded).decode("ascii") != payload:
        return None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None
