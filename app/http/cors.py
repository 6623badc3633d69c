"""Cross-origin resource sharing: which other origins' pages may read the API and its streams.

``server.cors.origins`` (docs/cors.md) lists the origins (or ``*``). For a request whose ``Origin`` is
allowed, every answer (problems, streams and 304s included) echoes that origin, exposes the headers a client
reads (ETag, Link, Allow, Location, Retry-After, Request-Id, Content-Range, ...) and, with
``server.cors.credentials``, allows credentials. A preflight (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) from an allowed origin on a routed URL is answered 204 here, before the
authentication hook: browsers send preflights without credentials. Anything else gets no CORS header at
all, and its preflight stays an ordinary authenticated ``OPTIONS`` (which the browser then fails).

One deliberate refusal: an event stream (``Accept: text/event-stream``) asked for by a page on another,
not allowed origin is 403 ``SSE003`` before any stream slot is taken. The browser could never read it, yet it
would hold a connection and a slot until the browser gave up. Other cross-origin requests are served as
usual (the browser keeps their answers from the page); non-browser clients send no ``Origin``.

Sits in the flow as one ``before_request`` (registered before authentication) and one ``after_request``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, g, request

from app.config import Settings
from app.errors import ProblemError
from app.runtime import runtime_of

ALLOW_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# The basic five, plus what the writes, ranges and stream resumption need from a page.
ALLOW_HEADERS = ("Accept", "Authorization", "Content-Type", "If-None-Match", "Request-Id", "If-Match",
                 "If-Range", "Range", "Idempotency-Key", "Prefer", "Last-Event-ID",
                 "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")   # browser agents on /mcp
# The basic six, plus the other headers Shoal sets that are not CORS-safelisted.
EXPOSE_HEADERS = ("ETag", "Link", "Allow", "Location", "Retry-After", "Request-Id", "Content-Range",
                  "Accept-Patch", "Accept-Ranges", "Preference-Applied", "Idempotent-Replayed", "Deprecation",
                  "Link-Template", "Cache-Freshness", "Cache-Sequence", "WWW-Authenticate", "Mcp-Session-Id")
MAX_AGE = 86400
SSE = "text/event-stream"
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_PREFLIGHT_KEY = "cors_preflight"


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """The configured origins (``("*",)``: any) and whether credentials are allowed."""

    origins: tuple[str, ...] = ()
    credentials: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> CorsPolicy:
        return cls(tuple(settings.cors_origins), settings.cors_credentials)

    @property
    def is_enabled(self) -> bool:
        return bool(self.origins)

    def allows(self, origin: str) -> bool:
        """True for a listed origin (compared lower-case, as browsers serialise it) or any with ``*``;
        never for the opaque ``null`` origin (sandboxed frames, ``file:`` pages)."""
        if not origin or origin == "null":
            return False
        return self.origins == ("*",) or origin.lower() in self.origins


def is_same_origin(origin: str, host: str) -> bool:
    """Whether ``Origin`` names the host the request was sent to (``Host``, default ports ignored): browsers
    send ``Origin`` on same-origin writes too, and those are never cross-origin."""
    parts = urlsplit(origin.lower())
    if parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
        return False
    default = ":" + _DEFAULT_PORTS[parts.scheme]
    return parts.netloc.removesuffix(default) == host.lower().removesuffix(default)


def preflight_headers(policy: CorsPolicy, origin: str) -> dict[str, str]:
    """The answer to an allowed preflight: the fixed method and header lists, cached a day by the browser."""
    headers = {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Methods": ", ".join(ALLOW_METHODS),
               "Access-Control-Allow-Headers": ", ".join(ALLOW_HEADERS), "Access-Control-Max-Age": str(MAX_AGE)}
    if policy.credentials:
        headers["Access-Control-Allow-Credentials"] = "true"
    return headers


def response_headers(policy: CorsPolicy, origin: str) -> dict[str, str]:
    """The headers of an actual answer to an allowed origin."""
    headers = {"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": ", ".join(EXPOSE_HEADERS)}
    if policy.credentials:
        headers["Access-Control-Allow-Credentials"] = "true"
    return headers


def _wants_stream() -> bool:
    return request.method in ("GET", "HEAD") and request.accept_mimetypes.best == SSE


def _before(policy: CorsPolicy) -> Response | None:
    """Answer an allowed preflight, refuse a cross-origin stream from an origin not allowed, else pass."""
    origin = request.headers.get("Origin")
    if origin is None or is_same_origin(origin, request.host):
        return None
    if policy.allows(origin):
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers \
                and request.url_rule is not None:
            g.setdefault(_PREFLIGHT_KEY, True)
            return Response(status=204, headers=preflight_headers(policy, origin))
        return None
    if _wants_stream():
        raise ProblemError("SSE003", detail=f"The origin {origin[:200]} may not open event streams here.")
    return None


def _after(policy: CorsPolicy, response: Response) -> Response:
    response.vary.add("Origin")   # the same URL answers differently per Origin: caches must keep them apart
    origin = request.headers.get("Origin")
    if origin is None or g.get(_PREFLIGHT_KEY) or not policy.allows(origin):
        return response
    response.headers.update(response_headers(policy, origin))
    return response


def document_preflight(document: dict[str, Any]) -> None:
    """Add the 204 preflight answer to every documented ``OPTIONS`` operation."""
    header = {"schema": {"type": "string"}}
    answer = {"description": "CORS preflight from an origin of server.cors.origins (answered without "
                             "authentication).",
              "headers": {name: dict(header) for name in ("Access-Control-Allow-Origin",
                                                          "Access-Control-Allow-Methods",
                                                          "Access-Control-Allow-Headers",
                                                          "Access-Control-Max-Age")}}
    for operations in document.get("paths", {}).values():
        options = operations.get("options")
        if isinstance(options, dict):
            options.setdefault("responses", {}).setdefault("204", answer)


def init_cors(app: Flask) -> None:
    """Register the hooks when ``server.cors.origins`` is set (else CORS is off: no header, no refusal but
    the cross-origin stream one, which holds whatever the configuration)."""
    policy = CorsPolicy.from_settings(runtime_of(app).settings)
    app.before_request(lambda: _before(policy))
    if policy.is_enabled:
        app.after_request(lambda response: _after(policy, response))
