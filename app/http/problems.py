"""RFC 9457 problem responses: one renderer and the error handlers that route every failure to it.

``ProblemError`` gets its registered code; Werkzeug's HTTPExceptions become generic ``about:blank``
problems; anything else is logged with the request id and answered with a bare 500 problem, so no
request can make the service print a traceback to a client.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed, UnprocessableEntity

from app.errors import ProblemError
from app.http.formats import requested_format
from app.http.request_id import current_request_id

log = logging.getLogger(__name__)
PROBLEM_TYPE = "application/problem+json"


def _base_path() -> str:
    value = current_app.config.get("SHOAL_BASE_PATH", "")
    return value if isinstance(value, str) else ""


def _requested_path() -> str:
    """The path as the client sent it: base path (SCRIPT_NAME, empty outside it) and format extension
    put back on the routed path."""
    if not request:
        return ""
    extension = requested_format(request.environ)
    return request.script_root + request.path + (f".{extension}" if extension else "")


def problem_response(status: int, title: str, detail: str, *, code: str | None = None,
                     headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> Response:
    base = _base_path()
    instance = _requested_path()
    body: dict[str, Any] = {
        "@context": f"{base}/api/context.jsonld",
        "@id": instance,
        "@type": "Problem",
        "type": f"{base}/api/errors/{code}" if code else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        "requestId": current_request_id(),
    }
    if code:
        body["code"] = code
    body.update(extra or {})
    response = Response(json.dumps(body, ensure_ascii=False), status=status, mimetype=PROBLEM_TYPE)
    response.headers["Cache-Control"] = "no-store"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def render_problem(error: ProblemError) -> Response:
    return problem_response(error.status, error.title, error.detail, code=error.code,
                            headers=error.headers, extra=error.extra)


def _render_http(error: HTTPException) -> Response:
    if isinstance(error, UnprocessableEntity):  # webargs validation failures
        messages = getattr(error, "data", {}).get("messages")
        return render_problem(ProblemError("API012", detail=_flatten(messages) or error.description))
    status = error.code or 500
    headers: dict[str, str] = {}
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        headers["Allow"] = ", ".join(sorted(error.valid_methods))
    return problem_response(status, HTTPStatus(status).phrase, error.description or "", headers=headers)


def _render_unexpected(error: Exception) -> Response:
    log.error("unhandled exception", exc_info=error,
              extra={"request_id": current_request_id(), "path": request.path})
    return problem_response(500, "Internal Server Error",
                            "The server failed to answer this request; it has been logged with the Request-Id.")


def _flatten(messages: Any) -> str:
    if not isinstance(messages, dict):
        return ""
    parts = []
    for location, fields in messages.items():
        if isinstance(fields, dict):
            parts += [f"{location}.{name}: {'; '.join(map(str, errs))}" for name, errs in fields.items()]
    return ", ".join(parts)


def init_problems(app: Flask) -> None:
    app.register_error_handler(ProblemError, render_problem)
    app.register_error_handler(HTTPException, _render_http)
    app.register_error_handler(Exception, _render_unexpected)
