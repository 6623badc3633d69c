"""Answers the HTTP server writes itself, before Flask sees a request: a request line or header over the
limits, or one that does not parse. They get what every other error gets: an RFC 9457 problem body,
a generated ``Request-Id`` (the client's cannot be read reliably from a request that did not parse),
``Cache-Control: no-store`` and the security headers; ``instance``/``@id`` are left out (the path may not
be known), and the connection is closed.

The limits are the same under gunicorn (``gunicorn.conf.py``: ``limit_request_line``,
``limit_request_fields``, ``limit_request_field_size``; its gevent worker writes its errors through
:func:`write_problem`) and under ``shoal`` (gevent's WSGI server, ``app.cli.ProblemHandler``):

- request line (method, target, version) longer than :data:`REQUEST_LINE_LIMIT` bytes: 414;
- more than :data:`HEADER_FIELDS_LIMIT` header fields, or one longer than :data:`HEADER_FIELD_SIZE_LIMIT`
  bytes (name, colon and value): 431;
- a malformed request line or header: 400.
"""

from __future__ import annotations

import json
import uuid
from http import HTTPStatus
from typing import Any

from app.http.security import security_headers

REQUEST_LINE_LIMIT = 8190        # gunicorn's maximum; gevent's own is 8192
HEADER_FIELDS_LIMIT = 100
HEADER_FIELD_SIZE_LIMIT = 8190
PROBLEM_TYPE = "application/problem+json"


def problem_bytes(status: int, detail: str, *, base_path: str, tls: bool) -> bytes:
    """A complete HTTP/1.1 response (status line, headers, body) carrying a problem; ``detail`` is
    cut to 200 characters (it may quote the client's input)."""
    reason = _reason(status)
    request_id = uuid.uuid4().hex
    body = json.dumps({
        "@context": f"{base_path}/api/context.jsonld", "@type": "Problem", "type": "about:blank",
        "title": reason, "status": status, "detail": detail[:200], "requestId": request_id,
    }, ensure_ascii=True).encode()
    headers = [("Content-Type", PROBLEM_TYPE), ("Content-Length", str(len(body))), ("Connection", "close"),
               ("Cache-Control", "no-store"), ("Request-Id", request_id), *security_headers(tls=tls)]
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def gunicorn_error_writer(*, base_path: str, tls: bool) -> Any:
    """A replacement for ``gunicorn.util.write_error(sock, status, reason, mesg)``."""
    from gunicorn import util

    def write_problem(sock: Any, status_int: int, reason: str, mesg: str) -> None:
        detail = mesg or reason
        util.write_nonblock(sock, problem_bytes(int(status_int), detail, base_path=base_path, tls=tls))

    return write_problem
