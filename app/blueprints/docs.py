"""OpenAPI annotations shared by the views: documented error responses and list parameters."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import request
from flask_smorest import Blueprint

from app.errors import REGISTRY
from app.history.selection import check_feed_parameters
from app.http.feed_docs import FEED_MARKER
from app.schemas.v1.envelopes import ListArgsV1, ProblemV1
from app.writes import dry_run
from app.writes.operations import TIER_NAMES, operation

F = TypeVar("F", bound=Callable[..., Any])
PROBLEM = "application/problem+json"
# One instance for every documented problem: given the class, flask-smorest built one per response (~1,200).
_PROBLEM_SCHEMA = ProblemV1()


def _codes(prefixes: tuple[str, ...]) -> str:
    return ", ".join(f"{code} ({d.title})" for code, d in REGISTRY.items() if code.startswith(prefixes))


def errors(blp: Blueprint, *statuses: int, codes: dict[int, str] | None = None) -> Callable[[F], F]:
    """Document problem responses: 406 and 500 always, plus the given statuses with their codes."""
    described = {406: "No acceptable representation (API001, API003).", 500: "Unexpected failure.",
                 503: "Engine unavailable or first sync not done (ENG001).",
                 400: "Invalid filter: " + _codes(("FLT",)) + ".",
                 404: "Not found.", 416: "Range not satisfiable.",
                 403: "Read access denied by the ACL policy (ACL001, naming resource and permission)."}
    described.update(codes or {})

    def decorate(view: F) -> F:
        for status in sorted({406, 500, *statuses}):
            view = blp.alt_response(status, schema=_PROBLEM_SCHEMA, content_type=PROBLEM,
                                    description=described[status])(view)
        return view

    return decorate


def list_parameters(blp: Blueprint) -> Callable[[F], F]:
    decorator: Callable[[F], F] = blp.doc(parameters=[
        {"in": "query", "schema": ListArgsV1},
        {"in": "header", "name": "Range", "required": False, "schema": {"type": "string"},
         "description": "items <first>-<last> (zero-based, inclusive); ignored when limit/offset are valid"},
        {"in": "header", "name": "If-Range", "required": False, "schema": {"type": "string"},
         "description": "apply Range only if this strong ETag is that of the list without Range (or of this very "
                        "206); else a 200"},
    ])
    return decorator


def feed_documented(blp: Blueprint, *, cursor: bool = True) -> Callable[[F], F]:
    """Mark a GET as having feeds (Atom, JSON Feed): ``app.openapi`` adds their media types and, with
    ``cursor``, the feed parameters (``before``, ``limit``, ``action``) the operation does not list itself.
    Documented on the operation, they are checked on every representation (JSON, HTML, streams too) as the
    feed parses them: a JSON request with ``before=-1`` is the feed's 400 API012, not a 200 that ignores it."""
    document: Callable[[F], F] = blp.doc(**{FEED_MARKER: {"cursor": cursor}})
    if not cursor:
        return document

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def checked(*args: Any, **kwargs: Any) -> Any:
            check_feed_parameters(request.args)
            return view(*args, **kwargs)

        return document(cast(F, checked))

    return decorate


IDEMPOTENT_MARKER = "x-shoal-idempotent"
IDEMPOTENCY_KEY = {
    "in": "header", "name": "Idempotency-Key", "required": False, "schema": {"type": "string", "maxLength": 257},
    "description": "draft-ietf-httpapi-idempotency-key-header: an sf-string of 1 to 255 visible ASCII characters. "
                   "The first answer is kept (writes.idempotency_ttl) and replayed to a retry of the same request "
                   "with Idempotent-Replayed: true; another request with the key is 422 API020, a retry while the "
                   "first runs 409 API021.",
}

REPLAYED_HEADER = {"Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]},
                                           "description": "This is the kept answer of an earlier request with "
                                                          "the same Idempotency-Key, replayed."}}


def write_documented(blp: Blueprint, name: str, *, body: dict[str, Any] | None = None,
                     returns: Any = None, success: int = 200, description: str = "") -> Callable[[F], F]:
    """Document a write operation from its row in the operation table: its tier, the request body (a JSON
    Schema, documented only: the view validates it and answers problems itself), the success answer
    (``returns``: a schema, or None for 204 only), and every problem a write can answer."""
    op = operation(name)
    tier = f"Operations level {int(op.tier)} ({TIER_NAMES[op.tier]}) or higher"
    codes = {
        400: "Invalid body (API006, API007, API008, API011; nested deeper than 64 levels: API015), malformed "
             "If-Match (API016), a com.docker.stack.* label changed (API017), or a rule of the operation (the "
             "domain's 4xx codes); engine rejected the arguments (ENG003).",
        403: f"{tier} required (OPS001), then ACL write permission on the object (ACL002).",
        404: "No such object (the kind's not-found code).",
        409: "Changed by someone else since it was read (the kind's conflict code), in use, name taken, "
             "or a JSON Patch test failed (API010).",
        412: "If-Match: no tag was issued for the object's current state (the kind's conflict code); nothing "
             "written.",
        413: "Body larger than 1 MiB (API014).",
        415: "PATCH with a Content-Type not listed in Accept-Patch (API004).",
        503: "Engine unavailable (ENG001).",
    }
    codes[400] += " A value past a configured bound (API018: field, limit, requested, setting); a bad " \
                  "Idempotency-Key (API019)."
    codes[409] += " A request with the same Idempotency-Key still running (API021, Retry-After)."
    codes[422] = "The Idempotency-Key was used for a different request (API020)."
    codes[503] += " The engine never got the request: nothing applied."
    codes[504] = ("ENG005: the engine took the write but did not answer in time (writes.timeout): it may have been "
                  "applied; the problem's check lists where to look. A retry with the same Idempotency-Key "
                  "cannot apply it twice.")
    statuses = [400, 403, 404, 409, 412, 413, 422, 503, 504] + ([415] if op.patch_types else [])
    docs: dict[str, Any] = {"description": f"{description}\n\n{tier}; Prefer: return=minimal answers "
                                           f"{'201' if op.create else '204'} without a body.".strip()}
    if body is not None or op.patch_types:
        content: dict[str, Any] = {}
        if op.method in ("PUT", "POST") and body is not None:
            content["application/json"] = {"schema": body}
        for media in op.patch_types:
            content[media] = {"schema": {"type": "array", "items": {"type": "object"}}
                              if media.endswith("json-patch+json") else (body or {"type": "object"})}
        docs["requestBody"] = {"required": op.method != "DELETE", "content": content}
    docs[IDEMPOTENT_MARKER] = True   # app.openapi adds the Idempotency-Key parameter (views add their own)
    dry = name in dry_run.SUPPORTED   # ?dryRun=true answers 200 WriteDryRun (others: 400 API022)
    if dry:
        docs["parameters"] = [dry_run.PARAMETER_DOC]   # a view's own blp.doc(parameters=...) lists it too
        codes[400] += " dryRun neither true nor false (API012)."
    else:
        codes[400] += " dryRun=true: this write has no dry run (API022)."

    def decorate(view: F) -> F:
        if returns is not None:
            answer = {"anyOf": [returns, dry_run.SCHEMA]} if dry and success == 200 else returns
            view = blp.response(success, answer, description=f"{op.name}: the state after the write, read back "
                                                             "from the engine" + ("; with dryRun=true what would "
                                                                                  "change." if dry else "."),
                                headers=REPLAYED_HEADER)(view)
            view = blp.alt_response(204, description="Prefer: return=minimal (Preference-Applied).")(view)
        else:
            view = blp.response(204, description=f"{op.name} done.", headers=REPLAYED_HEADER)(view)
        if dry and (returns is None or success != 200):
            view = blp.alt_response(200, schema=dry_run.SCHEMA, description="dryRun=true: what would change; "
                                                                             "nothing was written.")(view)
        view = errors(blp, *statuses, codes=codes)(view)
        decorated: F = blp.doc(**docs)(view)
        return decorated

    return decorate
