"""OpenAPI annotations shared by the views: documented error responses and list parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask_smorest import Blueprint

from app.errors import REGISTRY
from app.http.feed_docs import FEED_MARKER
from app.schemas.v1.envelopes import ListArgsV1, ProblemV1

F = TypeVar("F", bound=Callable[..., Any])
PROBLEM = "application/problem+json"


def _codes(prefixes: tuple[str, ...]) -> str:
    return ", ".join(f"{code} ({d.title})" for code, d in REGISTRY.items() if code.startswith(prefixes))


def errors(blp: Blueprint, *statuses: int, codes: dict[int, str] | None = None) -> Callable[[F], F]:
    """Document problem responses: 406 and 500 always, plus the given statuses with their codes."""
    described = {406: "No acceptable representation (API001, API003).", 500: "Unexpected failure.",
                 503: "Engine unavailable or first sync not done (ENG001).",
                 400: "Invalid filter: " + _codes(("FLT",)) + ".",
                 404: "Not found.", 416: "Range not satisfiable."}
    described.update(codes or {})

    def decorate(view: F) -> F:
        for status in sorted({406, 500, *statuses}):
            view = blp.alt_response(status, schema=ProblemV1, content_type=PROBLEM,
                                    description=described[status])(view)
        return view

    return decorate


def list_parameters(blp: Blueprint) -> Callable[[F], F]:
    decorator: Callable[[F], F] = blp.doc(parameters=[
        {"in": "query", "schema": ListArgsV1},
        {"in": "header", "name": "Range", "required": False, "schema": {"type": "string"},
         "description": "items <first>-<last> (zero-based, inclusive); ignored when limit/offset are valid"},
        {"in": "header", "name": "If-Range", "required": False, "schema": {"type": "string"},
         "description": "apply Range only if this strong ETag is that of the ranged response; else a 200"},
    ])
    return decorator


def feed_documented(blp: Blueprint, *, cursor: bool = True) -> Callable[[F], F]:
    """Mark a GET as having feeds (Atom, JSON Feed): ``app.openapi`` adds their media types and, with
    ``cursor``, the feed parameters (``before``, ``limit``, ``action``) the operation does not list itself."""
    decorator: Callable[[F], F] = blp.doc(**{FEED_MARKER: {"cursor": cursor}})
    return decorator
