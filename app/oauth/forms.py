"""Request parameters of the OAuth endpoints: bounded form bodies, no repeated parameter, JSON errors.

A form body is ``application/x-www-form-urlencoded``, at most :data:`MAX_FORM` bytes (read bounded, so a
lying or absent ``Content-Length`` changes nothing). RFC 6749 §3.1 forbids repeating a parameter: a
repeated one is ``invalid_request`` (``resource`` is no exception: one resource per grant here).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from flask import Request, Response, jsonify

MAX_FORM = 8 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class OAuthError(Exception):
    """An RFC 6749 error: ``error`` code, a description for the client (never a secret), HTTP status."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error, self.description, self.status = error, description, status

    def response(self) -> Response:
        response = jsonify({"error": self.error, "error_description": self.description})
        response.status_code = self.status
        response.headers.update(NO_STORE)
        return response


def pairs_to_params(pairs: list[tuple[str, str]]) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in params:
            raise OAuthError("invalid_request", f"the parameter {name[:40]!r} is repeated")
        params[name] = value
    return params


def query_params(request: Request) -> dict[str, str]:
    try:
        pairs = parse_qsl(request.query_string.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          max_num_fields=64)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "the query string is not readable") from None
    return pairs_to_params(pairs)


def form_params(request: Request) -> dict[str, str]:
    """The form body's parameters, or :class:`OAuthError` (wrong type, too large, not UTF-8, repeated)."""
    if request.mimetype != FORM_TYPE:
        raise OAuthError("invalid_request", f"the body must be {FORM_TYPE}")
    if request.content_length is not None and request.content_length > MAX_FORM:
        raise OAuthError("invalid_request", f"the form is larger than {MAX_FORM} bytes", 413)
    data = request.stream.read(MAX_FORM + 1)
    if len(data) > MAX_FORM:
        raise OAuthError("invalid_request", f"the form is larger than {MAX_FORM} bytes", 413)
    try:
        pairs = parse_qsl(data.decode("utf-8"), keep_blank_values=True, max_num_fields=64)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "the form is not readable (UTF-8, at most 64 fields)") from None
    return pairs_to_params(pairs)
