"""The one exception type for client-visible errors, and the registry of stable error codes.

Every layer (query, cache, engine boundary, HTTP) raises ``ProblemError(code, detail)``; the HTTP layer
renders it as ``application/problem+json``. The registry also serves ``/api/errors``, so documentation
and behaviour cannot drift apart. Codes are stable identifiers: never renumber, only append.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ErrorDef:
    code: str
    status: int
    title: str
    description: str
    suggestion: str


def _defs(*rows: tuple[str, int, str, str, str]) -> dict[str, ErrorDef]:
    return {row[0]: ErrorDef(*row) for row in rows}


REGISTRY: dict[str, ErrorDef] = _defs(
    ("API001", 406, "Event stream not available",
     "text/event-stream was requested from an endpoint that does not stream.",
     "Request application/json, or open the stream on a list, detail or /events URL."),
    ("API002", 406, "Endpoint is stream-only",
     "This endpoint only produces text/event-stream.",
     "Send Accept: text/event-stream."),
    ("API003", 406, "Not acceptable",
     "None of the media types in Accept (or the path extension) can be produced here.",
     "Use application/json, application/vnd.service.v1+json or text/html."),
    ("API004", 415, "Unsupported patch media type",
     "PATCH needs application/json-patch+json or application/merge-patch+json.",
     "Set Content-Type to one of the types listed in Accept-Patch."),
    ("API005", 500, "Streaming not supported", "The response writer cannot stream.",
     "Report this; it is a server configuration problem."),
    ("API006", 400, "Invalid request body", "The body does not decode to the expected shape.",
     "Check the request body against the OpenAPI document at /api."),
    ("API007", 400, "Unreadable request body", "The request body could not be read.",
     "Resend the request."),
    ("API008", 400, "Body is not JSON", "The patch body is not valid JSON.", "Send a JSON document."),
    ("API009", 500, "Serialisation failed", "The response could not be serialised.",
     "Report this with the Request-Id."),
    ("API010", 409, "JSON Patch test failed", "A JSON Patch test operation did not match.",
     "Re-read the resource and retry."),
    ("API011", 400, "JSON Patch not applicable", "The JSON Patch cannot be applied.",
     "Use add, replace, remove or test on existing keys."),
    ("API012", 400, "Invalid query parameter", "A query parameter has an invalid value.",
     "Check the parameter against the OpenAPI document at /api."),
    ("ACL001", 403, "Read access denied", "The caller may not read this resource.",
     "Ask an administrator for a read grant."),
    ("ACL002", 403, "Write access denied", "The caller may not change this resource.",
     "Ask an administrator for a write grant."),
    ("OPS001", 403, "Operations level too low",
     "The endpoint needs a higher operations level than the service is configured for.",
     "Raise server.operations_level if this change should be allowed."),
    ("FLT001", 400, "Filter too long", "The filter expression is longer than 512 characters.",
     "Shorten the expression."),
    ("FLT002", 400, "Filter syntax error", "The filter expression does not parse.",
     "Check the expression near the reported position; operators are CEL's."),
    ("FLT003", 400, "Filter evaluation failed", "The filter expression failed while evaluating an item.",
     "Check operand types, e.g. compare integers with integers."),
    ("FLT004", 400, "Unknown filter field", "The filter names a field this resource kind does not have.",
     "Use one of the fields listed for this kind in the documentation."),
    ("FLT005", 400, "Filter is not boolean", "The filter expression does not produce true or false.",
     "Compare values, e.g. slot > 1, instead of returning a value."),
    ("SSE001", 429, "Too many event streams", "The cap of concurrent event streams is reached.",
     "Retry after the number of seconds in Retry-After."),
    ("ENG001", 503, "Engine unavailable",
     "The container engine is unreachable, or the cache has not finished its first sync.",
     "Retry shortly; /-/ready tells when the service is in sync."),
    ("ENG003", 400, "Engine rejected the request", "The container engine rejected the arguments.",
     "Check the values sent."),
    ("ENG004", 500, "Engine error", "The container engine failed in an unexpected way.",
     "Retry; report it with the Request-Id if it persists."),
    ("NOD003", 404, "Node not found", "No node with this id is in the cache.",
     "List /nodes for valid ids."),
    ("SVC003", 404, "Service not found", "No service with this id is in the cache.",
     "List /services for valid ids."),
    ("TSK002", 404, "Task not found", "No task with this id is in the cache.", "List /tasks for valid ids."),
    ("STK001", 404, "Stack not found", "No stack with this name is in the cache.",
     "List /stacks for valid names."),
    ("CFG002", 404, "Config not found", "No config with this id is in the cache.",
     "List /configs for valid ids."),
    ("SEC002", 404, "Secret not found", "No secret with this id is in the cache.",
     "List /secrets for valid ids."),
    ("NET002", 404, "Network not found", "No network with this id is in the cache.",
     "List /networks for valid ids."),
    ("VOL002", 404, "Volume not found", "No volume with this name is in the cache.",
     "List /volumes for valid names."),
)


class ProblemError(Exception):
    """A client-visible error with a registered code; rendered as RFC 9457 problem+json.

    ``extra`` adds members to the problem body (e.g. ``position`` for filter errors).
    """

    def __init__(
        self,
        code: str,
        detail: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        definition = REGISTRY[code]  # KeyError here is a programming error: codes are registered
        super().__init__(f"{code}: {detail or definition.title}")
        self.code = code
        self.status = definition.status
        self.title = definition.title
        self.detail = detail or definition.description
        self.headers = headers or {}
        self.extra = extra or {}
