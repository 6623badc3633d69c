"""Content negotiation: path extension > Accept > default JSON, per endpoint capability.

``negotiated`` wraps a GET view: it picks the representation, answers ``text/html`` with the dashboard's
page of that URL (``app.dashboard`` registers the renderer; without it, a minimal shell) and SSE/Atom with
their handlers (registered by later layers), and lets JSON through to the view.
A request nothing can satisfy gets a 406 problem naming what is offered.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from flask import Response, g, render_template, request
from werkzeug.datastructures import MIMEAccept

from app.errors import ProblemError
from app.http.formats import requested_format

JSON = "application/json"
JSON_V1 = "application/vnd.service.v1+json"
JSON_LD = "application/ld+json"
HTML = "text/html"
SSE = "text/event-stream"
ATOM = "application/atom+xml"
FEED_JSON = "application/feed+json"
LATEST_VERSION = 1

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Representation:
    media: str          # "json" | "html" | "sse" | "atom" | "jsonfeed"
    version: int        # JSON schema version
    content_type: str   # the Content-Type to answer with


_BY_TYPE = {
    JSON: Representation("json", LATEST_VERSION, JSON),
    JSON_LD: Representation("json", LATEST_VERSION, JSON),
    JSON_V1: Representation("json", 1, JSON_V1),
    HTML: Representation("html", LATEST_VERSION, "text/html; charset=utf-8"),
    SSE: Representation("sse", LATEST_VERSION, SSE),
    ATOM: Representation("atom", LATEST_VERSION, ATOM),
    FEED_JSON: Representation("jsonfeed", LATEST_VERSION, FEED_JSON),
}
_BY_EXTENSION = {"json": _BY_TYPE[JSON], "html": _BY_TYPE[HTML], "atom": _BY_TYPE[ATOM],
                 "feed.json": _BY_TYPE[FEED_JSON]}
_FEEDS = ("atom", "jsonfeed")   # served by an endpoint's feed handler (Atom and JSON Feed alike)


def _without_parameters(accept: MIMEAccept) -> MIMEAccept:
    """Media-range parameters (``charset=utf-8``, ``level=1``) do not select a different representation
    here, but werkzeug only matches a range whose parameters equal the offer's: drop them, keep q."""
    ranges: dict[str, float] = {}
    for value, quality in accept:
        base = value.split(";", 1)[0].strip().lower()
        ranges[base] = max(quality, ranges.get(base, 0))
    return MIMEAccept(list(ranges.items()))


def negotiate(accept: MIMEAccept, extension: str | None, *, sse: bool, atom: bool) -> Representation:
    """Pick a representation or raise the 406 problem; SSE/Atom only where the endpoint has them."""
    accept = _without_parameters(accept)
    if extension is not None:
        chosen = _BY_EXTENSION[extension]
        if chosen.media in _FEEDS and not atom:
            raise ProblemError("API003", detail=f"The .{extension} form is not available here.")
        return chosen
    offered = [JSON, JSON_V1, JSON_LD, HTML] + ([SSE] if sse else []) + ([ATOM, FEED_JSON] if atom else [])
    if not accept:
        return _BY_TYPE[JSON]
    best = accept.best_match(offered)
    if best is None:
        if SSE in accept.values() and accept.quality(SSE) > 0:
            raise ProblemError("API001", detail="This endpoint does not stream events.")
        raise ProblemError("API003", detail="Offered here: " + ", ".join(offered) + ".")
    return _BY_TYPE[best]


StreamHandler = Callable[..., Any]
HtmlRenderer = Callable[..., Response]


def _shell(view: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any], *,
           stream: bool, feed: bool) -> Response:
    return Response(render_template("spa.html", feed_path=request.path if feed else None), mimetype="text/html")


_html_renderer: HtmlRenderer = _shell


def set_html_renderer(renderer: HtmlRenderer) -> None:
    """Install the dashboard's page renderer: ``renderer(view, args, kwargs, stream=, feed=)``."""
    global _html_renderer
    _html_renderer = renderer


def html_answer(view: Callable[..., Any] | None = None, args: tuple[Any, ...] = (),
                kwargs: dict[str, Any] | None = None, *, stream: bool = False, feed: bool = False) -> Response:
    """The ``text/html`` answer of the current URL: ``view`` is its JSON view (None: a page of its own)."""
    return _html_renderer(view, args, kwargs or {}, stream=stream, feed=feed)


def json_representation() -> Representation:
    return _BY_TYPE[JSON]


def negotiated(*, sse: StreamHandler | None = None, atom: StreamHandler | None = None
               ) -> Callable[[Callable[P, R]], Callable[P, Any]]:
    """Route one GET URL to JSON (the view), the dashboard shell, or the SSE/Atom handlers."""

    def decorate(view: Callable[P, R]) -> Callable[P, Any]:
        @functools.wraps(view)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            rep = negotiate(request.accept_mimetypes, requested_format(request.environ),
                            sse=sse is not None, atom=atom is not None)
            g.representation = rep
            g.feed_capable = atom is not None
            if rep.media == "html":
                return _html_renderer(view, args, kwargs, stream=sse is not None, feed=atom is not None)
            if rep.media == "sse" and sse is not None:
                return sse(*args, **kwargs)
            if rep.media in _FEEDS and atom is not None:
                return atom(*args, **kwargs)
            return view(*args, **kwargs)

        return wrapper

    return decorate


def wants_html(accept: MIMEAccept, extension: str | None) -> bool:
    """Whether a request outside negotiated views (unknown paths, the readiness gate) is a browser's:
    the ``.html`` extension, or an Accept that prefers HTML to JSON, with the same precedence as
    ``negotiate``."""
    if extension is not None:
        return extension == "html"
    return _without_parameters(accept).best_match([JSON, HTML]) == HTML


def current_representation() -> Representation:
    rep = g.get("representation")
    return rep if isinstance(rep, Representation) else _BY_TYPE[JSON]
