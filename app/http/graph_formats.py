"""Negotiation for the topology endpoint, whose representations are graph formats (docs/topology.md):
JGF as JSON (``application/vnd.jgf+json``, ``application/json``, the versioned JSON type), GraphML
(``application/graphml+xml``), DOT (``text/vnd.graphviz``) and the dashboard shell; extensions
``.jgf .graphml .dot`` (stripped by ``app.http.formats`` on this path only), ``.json``, ``.html``.

Same precedence as ``app.http.negotiation``: extension, then Accept, then JSON. No SSE (406 ``API001``),
no feeds (406 ``API003``, ``.atom`` included), anything else unproducible → 406 ``API003``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from flask import g, request
from werkzeug.datastructures import MIMEAccept

from app.errors import ProblemError
from app.http.formats import requested_format
from app.http.negotiation import HTML, JSON, JSON_LD, JSON_V1, LATEST_VERSION, SSE, Representation, html_answer

JGF = "application/vnd.jgf+json"
GRAPHML = "application/graphml+xml"
DOT = "text/vnd.graphviz"
OFFERED = (JSON, JGF, JSON_V1, JSON_LD, GRAPHML, DOT, HTML)
_BY_EXTENSION = {"jgf": JGF, "graphml": GRAPHML, "dot": DOT, "json": JSON, "html": HTML}

P = ParamSpec("P")
R = TypeVar("R")


def _bare(accept: MIMEAccept) -> MIMEAccept:
    """Media-range parameters do not select a graph format either: drop them, keep the best q."""
    ranges: dict[str, float] = {}
    for value, quality in accept:
        base = value.split(";", 1)[0].strip().lower()
        ranges[base] = max(quality, ranges.get(base, 0))
    return MIMEAccept(list(ranges.items()))


def negotiate_graph(accept: MIMEAccept, extension: str | None) -> str:
    """The media type to answer with, or the 406 problem."""
    if extension is not None:
        chosen = _BY_EXTENSION.get(extension)
        if chosen is None:
            raise ProblemError("API003", detail=f"The .{extension} form is not available here.")
        return chosen
    accept = _bare(accept)
    if not accept:
        return JSON
    best = accept.best_match(OFFERED)
    if best is None:
        if accept.quality(SSE) > 0 and SSE in accept.values():
            raise ProblemError("API001", detail="This endpoint does not stream events.")
        raise ProblemError("API003", detail="Offered here: " + ", ".join(OFFERED) + ".")
    return best


def graph_negotiated(view: Callable[P, R]) -> Callable[P, Any]:
    """Pick the graph format (``current_graph_media``), answer ``text/html`` with the shell."""

    @functools.wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        media = negotiate_graph(request.accept_mimetypes, requested_format(request.environ))
        g.graph_media = media
        g.representation = Representation("json", 1, JSON_V1) if media == JSON_V1 \
            else Representation("json", LATEST_VERSION, JSON)
        if media == HTML:
            return html_answer(view, args, kwargs)
        return view(*args, **kwargs)

    return wrapper


def current_graph_media() -> str:
    media = g.get("graph_media")
    return media if isinstance(media, str) else JSON
