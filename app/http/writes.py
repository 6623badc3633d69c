"""The HTTP side of every write: level gate, body, preconditions, engine call, read-back, ``Prefer``.

A write view reads as a script of these steps, and each step owns its failures:

- :func:`begin` — the operations level (403 ``OPS001``, before anything else is looked at), then the ACL
  write permission on the operation's key, resolved from the request's URL (403 ``ACL002``; see
  :func:`app.http.acl.write_target`).
- :func:`target` — the object from the cache (404 with the kind's code, e.g. ``SVC003``), then
  ``If-Match`` against the ETag of the object's detail (412 with the kind's conflict code; nothing written).
- :func:`json_body` / :func:`patch_body` — at most 1 MiB (413 ``API014``), decodable JSON (``API006``,
  ``API007``, ``API008``); PATCH only with a type the operation accepts (415 ``API004`` + ``Accept-Patch``).
- :func:`engine_write` — the engine call with the object's version index, announced to the audit log;
  engine failures become the operation's domain codes (409 ``SVC001`` for an out-of-sequence update...).
- :func:`read_back` — the engine's state after the write, applied to the cache (a following GET sees it)
  and answered as the detail; ``Prefer: return=minimal`` → 204, ``Prefer: wait=N`` → held until the
  rollout settles (:mod:`app.writes.rollout`).

Views that call the engine are exempt from the admission gate (they wait on I/O, not CPU).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from flask import Response, g, request

from app.cache.entries import Entry
from app.engine.writes import EngineWriter, WriteFailure
from app.errors import ProblemError
from app.http import respond
from app.http.allow import write_refusal
from app.http.conditional import compute_etag
from app.http.jsonld import envelope
from app.http.request_id import current_request_id
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import Operation, operation
from app.writes.rollout import changes_tasks, started_at, wait_settled

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
T = TypeVar("T")

# Domain codes per target type: (not found, version conflict, in use / gone, name taken).
_CODES: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "service": ("SVC003", "SVC001", "SVC002", None),
    "node": ("NOD003", "NOD002", "NOD001", None),
    "task": ("TSK002", None, "TSK001", None),
    "config": ("CFG002", "CFG005", "CFG001", "CFG003"),
    "secret": ("SEC002", "SEC005", "SEC001", "SEC003"),
    "network": ("NET002", None, "NET001", "NET003"),
    "volume": ("VOL002", None, "VOL001", None),
    "stack": ("STK001", None, None, None),
    "plugin": ("PLG004", None, None, None),
    "swarm": ("SWM002", "SWM012", None, None),
}
_KIND_OF_TARGET = {kind.value: kind for kind in ResourceKind}


def not_found_code(target_type: str) -> str:
    return _CODES[target_type][0]


# ---------------------------------------------------------------------------------------------- gate
def begin(name: str) -> Operation:
    """Start a write: refuse it when the operations level is too low (403 OPS001), then when the caller
    may not write the URL's object (403 ACL002; the key comes from ``request.view_args``)."""
    op = operation(name)
    refusal = write_refusal(op)
    if refusal is not None:
        raise refusal
    g.write_operation = op
    return op


# ---------------------------------------------------------------------------------------------- target
def target(op: Operation, kind: ResourceKind, object_id: str) -> Entry:
    """The cached object (404 with the kind's code), checked against ``If-Match``."""
    entry = current_runtime().cache.get(kind, object_id)
    if entry is None:
        raise ProblemError(not_found_code(op.target), detail=f"No {kind.value} {object_id!r}.", status=404)
    check_if_match(op, entry)
    return entry


def detail_etag(entry: Entry) -> str:
    """The ETag a GET of the object's detail carries now (``application/json`` variant)."""
    return compute_etag(respond.detail(entry).get_data())


def check_if_match(op: Operation, entry: Entry) -> None:
    """RFC 9110 §13.1.1: strong comparison; ``*`` matches any current object; a tag of another variant
    of the same body (``"<hash>-vnd.service.v1+json"``) matches too. A mismatch is 412 with the kind's
    conflict code, and nothing is written."""
    header = request.headers.get("If-Match")
    if header is None:
        return
    tags = [tag.strip() for tag in header.split(",") if tag.strip()]
    if "*" in tags:
        return
    current = detail_etag(entry).strip('"')
    for tag in tags:
        if tag.startswith('"') and tag.endswith('"') and tag[1:-1].split("-", 1)[0] == current:
            return
    code = _CODES[op.target][1] or "API012"
    raise ProblemError(code, status=412, detail=f"If-Match does not match the current ETag of "
                                               f"{entry.kind.value} {entry.id} (it changed since it was read); "
                                               "nothing was written.")


# ---------------------------------------------------------------------------------------------- bodies
def _raw_body() -> bytes:
    length = request.content_length
    if length is not None and length > MAX_BODY:
        raise ProblemError("API014", detail=f"The body has {length} bytes; at most {MAX_BODY} are accepted.")
    try:
        data = request.stream.read(MAX_BODY + 1)
    except (OSError, ValueError) as exc:
        raise ProblemError("API007", detail=f"The body could not be read: {exc}") from None
    if len(data) > MAX_BODY:
        raise ProblemError("API014", detail=f"The body is larger than {MAX_BODY} bytes.")
    return data


def _decode(data: bytes, code: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProblemError(code, detail=f"The body is not JSON: {exc}") from None


def json_body(*, required: bool = True) -> Any:
    """A PUT/POST JSON body (Content-Type not checked, as the reference says); ``None`` when empty and
    not required."""
    data = _raw_body()
    if not data.strip():
        if required:
            raise ProblemError("API006", detail="This operation needs a JSON body.")
        return None
    return _decode(data, "API006")


def patch_body(op: Operation) -> tuple[str, Any]:
    """(media type, decoded patch); 415 API004 with ``Accept-Patch`` for any other Content-Type."""
    media = (request.mimetype or "").lower()
    if media not in op.patch_types:
        raise ProblemError("API004", headers={"Accept-Patch": ", ".join(op.patch_types)},
                           detail=f"Content-Type {media or '(none)'} is not accepted here; "
                                  f"use {' or '.join(op.patch_types)}.")
    return media, _decode(_raw_body(), "API008")


def require_object(body: Any, code: str = "API006") -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ProblemError(code, detail="The body must be a JSON object.")
    return body


# ---------------------------------------------------------------------------------------------- engine
def writer() -> EngineWriter:
    return current_runtime().writer


def engine_write(op: Operation, kind: ResourceKind | None, object_id: str | None, call: Callable[[], T]) -> T:
    """Run one engine write: announced to the audit log, failures mapped to the operation's codes."""
    runtime = current_runtime()
    withdraw = None
    if kind is not None and object_id is not None:
        withdraw = runtime.audit.expect(kind, object_id, audit_stamp())
    try:
        result = call()
    except WriteFailure as failure:
        if withdraw is not None:
            withdraw()
        raise failure_problem(op, failure) from None
    log.info("write applied", extra={"operation": op.name, "object": object_id,
                                     "request_id": current_request_id()})
    return result


def audit_stamp() -> dict[str, Any]:
    """``{identity, requestId}``; the identity is the authenticated subject once auth modes exist."""
    identity = g.get("identity")
    subject = getattr(identity, "subject", None) if identity is not None else None
    return {"identity": subject or "anonymous", "requestId": current_request_id()}


def failure_problem(op: Operation, failure: WriteFailure) -> ProblemError:
    missing, conflict, in_use, taken = _CODES[op.target]
    detail = f"The engine refused {op.name}: {failure.message}"
    if failure.reason == "out_of_sequence" and conflict:
        return ProblemError(conflict, detail=detail)
    if failure.reason == "not_found":
        return ProblemError(missing, detail=detail, status=404)
    if failure.reason == "in_use" and in_use:
        return ProblemError(in_use, detail=detail)
    if failure.reason == "exists" and taken:
        return ProblemError(taken, detail=detail)
    if failure.reason in ("invalid", "exists", "in_use"):
        return ProblemError("ENG003", detail=detail)
    if failure.reason == "unavailable":
        return ProblemError("ENG001", detail=detail, headers={"Retry-After": "1"})
    return ProblemError("ENG004", detail=detail)


def read_back(op: Operation, kind: ResourceKind, object_id: str) -> Entry | None:
    """The engine's state of the object after the write, applied to the cache; None when it is gone."""
    cache = current_runtime().cache
    token = cache.write_token()
    try:
        raw: dict[str, Any] | None = writer().inspect(kind.value, object_id)
    except WriteFailure as failure:
        if failure.reason != "not_found":
            raise failure_problem(op, failure) from None
        raw = None
    cache.apply_inspect(kind, object_id, raw, token)
    return cache.get(kind, object_id)


# ---------------------------------------------------------------------------------------------- Prefer
@dataclass(frozen=True, slots=True)
class Preferences:
    minimal: bool = False
    wait: float | None = None


MAX_WAIT = 300.0


def preferences() -> Preferences:
    """RFC 7240 ``Prefer`` (several headers or comma lists; unknown preferences ignored)."""
    minimal, wait = False, None
    for header in request.headers.getlist("Prefer"):
        for token in header.split(","):
            name, _, value = token.strip().partition("=")
            name, value = name.strip().lower(), value.strip().strip('"')
            if name == "return":
                minimal = value.lower() == "minimal"
            elif name == "wait":
                try:
                    seconds = float(value)
                except ValueError:
                    continue
                if seconds >= 0:
                    wait = min(seconds, MAX_WAIT)
    return Preferences(minimal, wait)


def applied(response: Response, *names: str) -> Response:
    if names:
        response.headers["Preference-Applied"] = ", ".join(names)
    return response


def empty(status: int = 204) -> Response:
    """A body-less answer: no Content-Type either (werkzeug would label the nothing as text/html)."""
    response = Response(status=status)
    response.headers.pop("Content-Type", None)
    return response


def no_content() -> Response:
    return empty(204)


def minimal_or(build: Callable[[], Response], *, status: int = 200, extra_applied: tuple[str, ...] = ()
               ) -> Response:
    """204 + ``Preference-Applied: return=minimal`` when asked, else ``build()``."""
    if preferences().minimal:
        return applied(empty(204 if status == 200 else status), "return=minimal", *extra_applied)
    return applied(build(), *extra_applied)


def answer_detail(entry: Entry | None, *, status: int = 200, members: dict[str, Any] | None = None) -> Response:
    """The object's detail as a GET would serve it (plus ``members``, e.g. the rollout outcome)."""
    if entry is None:
        return no_content()
    response = respond.detail(entry, members)
    if not members:   # the bytes a GET of the detail gets: its validator, usable for the next If-Match
        response.headers["ETag"] = compute_etag(response.get_data())
    response.status_code = status
    return response


def answer_document(path: str, jsonld_type: str, members: dict[str, Any], *, status: int = 200,
                    cache_control: str = "no-cache") -> Response:
    """A sub-resource (or other non-detail) answer: ``{@context, @id: path, @type, ...members}``."""
    base = respond.base_path()
    body = envelope(base, path, jsonld_type)
    body.update(members)
    return respond.document(body, status=status, cache_control=cache_control)


def created(location: str, build: Callable[[], Response]) -> Response:
    """201 + ``Location`` (base path included); an empty body with ``return=minimal``."""
    if preferences().minimal:
        response = applied(empty(201), "return=minimal")
    else:
        response = build()
        response.status_code = 201
    response.headers["Location"] = respond.base_path() + location
    return response


def kind_of(target_type: str) -> ResourceKind:
    return _KIND_OF_TARGET[target_type]


# ---------------------------------------------------------------------------------------------- spec updates
Mutate = Callable[[dict[str, Any]], dict[str, Any] | None]
Answer = Callable[[Entry | None, dict[str, Any] | None], Response]


def update_versioned(op: Operation, entry: Entry, mutate: Mutate, *, rollback: bool = False,
                     answer: Answer | None = None) -> Response:
    """Change a versioned object's spec (service, node, config, secret) and answer with the engine's state.

    ``mutate`` gets a deep copy of the cached spec (return a new one or change it in place); the engine
    gets it with the cached version index, so a change made meanwhile by anyone makes this one fail with
    the kind's 409 code (:func:`_update_spec`: a version moved by the engine alone is no conflict). For
    services, ``Prefer: wait=N`` holds the answer until the rollout settles and adds ``rollout`` to the body.
    ``answer(entry, rollout)`` builds the body (default: the detail)."""
    kind = entry.kind
    spec = copy.deepcopy(entry.raw.get("Spec") or {})
    before = copy.deepcopy(spec)
    changed = mutate(spec)
    new_spec = spec if changed is None else changed
    version = int(((entry.raw.get("Version") or {}).get("Index")) or 0)
    if kind not in (ResourceKind.SERVICE, ResourceKind.NODE, ResourceKind.CONFIG, ResourceKind.SECRET):
        raise ValueError(f"{kind.value} objects have no versioned spec")
    engine = writer()
    prefs = preferences()
    engine_write(op, kind, entry.id, functools.partial(_update_spec, engine, entry, version, before, new_spec,
                                                       rollback))
    rollout = None
    extra: tuple[str, ...] = ()
    if kind is ResourceKind.SERVICE and prefs.wait is not None:
        rollout = wait_settled(engine, entry.id, prefs.wait, expects_update=rollback or changes_tasks(before, new_spec),
                               previous_start=started_at(entry.raw))
        extra = (f"wait={prefs.wait:g}",)
    fresh = read_back(op, kind, entry.id)
    build = answer or (lambda e, r: answer_detail(e, members={"rollout": r} if r else None))
    return minimal_or(lambda: build(fresh, rollout), extra_applied=extra)


def _update_spec(engine: EngineWriter, entry: Entry, version: int, read: dict[str, Any], new_spec: dict[str, Any],
                 rollback: bool) -> None:
    """The versioned update. The engine also bumps an object's version for changes of its own (a service's
    rolling-update progress), so an update refused as out of sequence is retried once, with the engine's
    current version, when the engine's spec is still the one the change was computed from: nobody else
    changed it. Otherwise (and always under If-Match, which asks for the exact state read) the 409 stands."""
    try:
        engine.update_spec(entry.kind.value, entry.id, version, new_spec, rollback=rollback)
    except WriteFailure as failure:
        if failure.reason != "out_of_sequence" or request.headers.get("If-Match") is not None:
            raise
        current = engine.inspect(entry.kind.value, entry.id)
        if current.get("Spec") != read:
            raise
        fresh_version = int((current.get("Version") or {}).get("Index") or 0)
        engine.update_spec(entry.kind.value, entry.id, fresh_version, new_spec, rollback=rollback)
