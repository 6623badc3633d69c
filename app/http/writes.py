"""The HTTP side of every write: level gate, body, preconditions, engine call, read-back, ``Prefer``.

A write view reads as a script of these steps, and each step owns its failures:

- :func:`begin` — the operations level (403 ``OPS001``, before anything else is looked at), then the ACL
  write permission on the operation's key, resolved from the request's URL (403 ``ACL002``; see
  :func:`app.http.acl.write_target`).
- :func:`target` — the object from the cache (404 with the kind's code, e.g. ``SVC003``), then
  ``If-Match``: malformed is 400 ``API016``; a tag holds while the object it was issued for is unchanged
  (:mod:`app.http.issued_tags`), else 412 with the kind's conflict code (nothing written).
- :func:`json_body` / :func:`patch_body` — at most 1 MiB (413 ``API014``), decodable JSON (``API006``,
  ``API007``, ``API008``) nested at most 64 levels (``API015``); PATCH only with a type the operation
  accepts (415 ``API004`` + ``Accept-Patch``).
- :func:`engine_write` — the engine call with the object's version index, announced to the audit log;
  engine failures become the operation's domain codes (409 ``SVC001`` for an out-of-sequence update...);
  a call the engine took but did not answer is 504 ``ENG005`` (outcome unknown, audit kept pending).
  Before it, :func:`update_versioned` checks the new spec against the bounds (400 ``API018``,
  :mod:`app.writes.bounds`), and :func:`begin` handles ``Idempotency-Key`` (:mod:`app.http.idempotency`).
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
import re
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, TypeVar

from flask import Response, g, request
from gevent import get_hub

from app.cache.entries import Entry
from app.engine.writes import EngineWriter, WriteFailure
from app.engine.writes import outcome_unknown as engine_outcome_unknown
from app.errors import ProblemError
from app.http import idempotency, respond
from app.http.acl import current_access
from app.http.allow import acl_refusal, write_refusal
from app.http.conditional import compute_etag, parse_if_match
from app.http.issued_tags import issued_tags, record_issued, remember_for
from app.http.jsonld import envelope
from app.http.request_id import current_request_id
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes import dry_run, labels
from app.writes.bounds import WriteBounds, check_patch, check_spec
from app.writes.operations import Operation, operation, tier_refusal
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
    may not write the URL's object (403 ACL002; the key comes from ``request.view_args``). An agent tool's
    call (``g.tool_level``, app.mcp.tool_dispatch) is gated by the agents' level instead of the server's.
    ``?dryRun=true`` marks a dry run (:mod:`app.writes.dry_run`: 400 API022 for a write without one), which
    claims no Idempotency-Key."""
    op = operation(name)
    tool_level = g.get("tool_level")
    refusal = write_refusal(op) if tool_level is None else tool_refusal(op, tool_level)
    if refusal is not None:
        raise refusal
    dry = dry_run.requested()
    if dry:
        dry_run.check_supported(op)
    g.dry_run = dry
    g.write_operation = op
    if not dry:
        idempotency.claim(audit_stamp()["identity"])   # a replay, 422 or 409 ends the request here
    return op


def tool_refusal(op: Operation, level: int) -> ProblemError | None:
    """:func:`write_refusal` at the agent tools' level (``mcp.operations_level``) rather than the server's."""
    refusal = tier_refusal(op, level)
    if refusal is not None:
        return ProblemError("OPS001", detail=refusal, extra={"requiredLevel": int(op.tier), "configuredLevel": level})
    return acl_refusal(op)


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
    """RFC 9110 §13.1.1 with strong comparison (a ``W/`` tag never holds): ``*`` alone holds for any current
    object; a tag holds when it was issued for this object (its detail, a sub-resource, a write's answer)
    and the object's written state has not changed since (:mod:`app.http.issued_tags`: a service's tasks
    changing does not count), or when it is the detail's current tag (any variant). A malformed header
    (``"a", *`` included) is 400 ``API016``; no tag holding is 412 with the kind's conflict code, and
    nothing is written."""
    values = request.headers.getlist("If-Match")
    if not values:
        return
    try:
        tags = parse_if_match(", ".join(values))
    except ValueError as exc:
        raise ProblemError("API016", detail=f"If-Match: {exc}") from None
    if tags is None:
        return
    registry = issued_tags()
    strong = [tag for tag in tags if not tag.startswith("W/")]
    if any(registry.shows_current(tag, entry) for tag in strong):
        return
    current = detail_etag(entry).strip('"') if strong else None
    if any(tag[1:-1].split("-", 1)[0] == current for tag in strong):
        return
    code = _CODES[op.target][1] or "API012"
    raise ProblemError(code, status=412, detail=f"If-Match does not match the current ETag of "
                                               f"{entry.kind.value} {entry.id} (it changed since it was read); "
                                               "nothing was written.")


def require_stack_write(new_labels: Mapping[str, Any]) -> None:
    """A create whose labels put the object in a stack (``com.docker.stack.namespace``) needs write on that
    stack as well as on ``<type>:*`` (403 ``ACL002`` naming ``stack:<name>``): a stack grant covers what
    carries the label, so setting it is writing to the stack."""
    stack = labels.stack_of(new_labels)
    access = current_access()
    if stack is None or access.unrestricted or access.allows_any("write", [("stack", stack)]):
        return
    raise ProblemError("ACL002", detail=f"write access denied for stack:{stack} (the new object's "
                                        f"{labels.STACK_NAMESPACE} label)",
                       extra={"resource": f"stack:{stack}", "permission": "write"})


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


MAX_DEPTH = 64                 # nesting of arrays and objects in a body (API015); no write body needs 10
THREAD_DECODE = 64 * 1024      # bodies larger than this are decoded in a thread, not on the hub


def _decode(data: bytes, code: str) -> Any:
    """JSON with at most :data:`MAX_DEPTH` levels of nesting. Deeper bodies were a 500: ``json.loads``
    raises ``RecursionError`` near 1,000 levels, and the patch and validation code recurses below that."""
    if len(data) > THREAD_DECODE:   # decoding and the depth walk grow with the body: off the hub
        outcome: tuple[str, Any] = get_hub().threadpool.apply(_decode_checked, (data,))
    else:
        outcome = _decode_checked(data)
    verdict, value = outcome
    if verdict == "deep":
        raise ProblemError("API015", detail=f"The body nests arrays and objects deeper than {MAX_DEPTH} levels.")
    if verdict == "invalid":
        raise ProblemError(code, detail=f"The body is not JSON: {value}")
    return value


def _decode_checked(data: bytes) -> tuple[str, Any]:
    """(``"ok"``, value) / (``"deep"``, None) / (``"invalid"``, reason): no exception crosses the thread."""
    try:
        value = json.loads(data)
    except RecursionError:
        return "deep", None
    except (UnicodeDecodeError, ValueError) as exc:
        return "invalid", str(exc)
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and nesting_depth(data) > MAX_DEPTH:
        return "deep", None
    return "ok", value


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")        # +1 / -1 as signed bytes
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of arrays/objects in a valid JSON text, in C-speed passes (strings dropped, the
    brackets kept as +1/-1, the running sum's maximum): about 10 ms per MiB, no recursion to exhaust."""
    steps = _JSON_STRING.sub(b"", data).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    return max(accumulate(array("b", steps)), default=0)


def json_body(*, required: bool = True) -> Any:
    """A PUT/POST JSON body (Content-Type not checked: any type is read as JSON); ``None`` when empty and
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
    patch = _decode(_raw_body(), "API008")
    check_patch(patch, write_bounds())   # API018: at most writes.max_patch_operations
    return media, patch


def require_object(body: Any, code: str = "API006") -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ProblemError(code, detail="The body must be a JSON object.")
    return body


# ---------------------------------------------------------------------------------------------- engine
def writer() -> EngineWriter:
    return current_runtime().writer


def write_bounds() -> WriteBounds:
    return WriteBounds.of(current_runtime().settings)


def engine_write(op: Operation, kind: ResourceKind | None, object_id: str | None, call: Callable[[], T],
                 *, version: int | None = None) -> T:
    """Run one engine write: announced to the audit log (and, with an Idempotency-Key, recorded as started
    with the ``version`` it is based on), failures mapped to the operation's codes. An unknown outcome
    (the engine took the request but did not answer) is 504 ``ENG005``, and the audit stays pending for
    ``writes.pending_audit`` seconds, so the change is attributed when the watcher sees it."""
    if dry_run.active():   # a view's dry-run branch was missed: never write (app.writes.dry_run)
        raise RuntimeError(f"{op.name}: the engine was about to be called in a dry run")
    runtime = current_runtime()
    withdraw = None
    stamp = audit_stamp()
    if kind is not None and object_id is not None:
        withdraw = runtime.audit.expect(kind, object_id, stamp)
    idempotency.engine_call_starting(kind.value if kind else None, object_id, version)
    try:
        result = call()
    except WriteFailure as failure:
        if failure.reason == "unknown":
            if kind is not None and object_id is not None:
                runtime.audit.expect(kind, object_id, stamp, lifetime=runtime.settings.writes_pending_audit)
            raise outcome_unknown(op, kind, object_id, failure) from None
        if withdraw is not None:
            withdraw()
        raise failure_problem(op, failure) from None
    log.info("write applied", extra={"operation": op.name, "object": object_id,
                                     "request_id": current_request_id()})
    return result


def audit_stamp() -> dict[str, Any]:
    """``{identity, requestId}``; the identity is the authenticated subject once auth modes exist. A write
    made by an agent tool adds ``via: "mcp"``, the ``tool`` and, with a bearer token, the OAuth ``client``."""
    identity = g.get("identity")
    subject = getattr(identity, "subject", None) if identity is not None else None
    stamp: dict[str, Any] = {"identity": subject or "anonymous",
                             "requestId": idempotency.logical_request_id() or current_request_id()}   # a keyed
    #                                                                                  retry: the first one's
    tool, client = g.get("mcp_tool"), g.get("mcp_client_id")
    if tool is not None or client is not None:
        stamp["via"] = "mcp"
    if tool is not None:
        stamp["tool"] = tool
    if client is not None:
        stamp["client"] = client
    return stamp


def outcome_unknown(op: Operation, kind: ResourceKind | None, object_id: str | None,
                    failure: WriteFailure) -> ProblemError:
    """504 ``ENG005``: the write may have been applied (or may still be); the body says how to find out."""
    base = respond.base_path()
    check: list[str] = []
    if kind is not None and object_id is not None:
        check = [f"{base}{kind.spec.path}/{object_id}", f"{base}/history?type={kind.value}&resourceId={object_id}"]
    return engine_outcome_unknown(op.name, failure, check, retry_safe=g.get("idempotency") is not None)


def failure_problem(op: Operation, failure: WriteFailure) -> ProblemError:
    missing, conflict, in_use, taken = _CODES[op.target]
    detail = f"The engine refused {op.name}: {failure.message}"
    claimed = g.get("idempotency")
    if failure.reason == "out_of_sequence" and conflict and claimed is not None and claimed.is_retry_of_unknown:
        return ProblemError(conflict, detail=f"{detail}. This retries an Idempotency-Key whose first request "
                                             f"({claimed.record.request_id}) had an unknown outcome: the object "
                                             "changed since, most likely by that request; see its /history.")
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
    """The engine's state of the object after the write, applied to the cache; None when it is gone.

    The write is applied by now, so a failed read is never told as "engine unavailable" (503 says nothing
    was applied, and frees an Idempotency-Key for a retry that would apply it again): it is 504 ``ENG005``
    with ``outcome: applied``, which keeps the key (a retry is refused, pinned to the old version)."""
    cache = current_runtime().cache
    token = cache.write_token()
    try:
        raw: dict[str, Any] | None = writer().inspect(kind.value, object_id)
    except WriteFailure as failure:
        if failure.reason != "not_found":
            base = respond.base_path()
            check = [f"{base}{kind.spec.path}/{object_id}", f"{base}/history?type={kind.value}&resourceId={object_id}"]
            raise ProblemError("ENG005", detail=f"{op.name} was applied, but reading the result back from the "
                                                f"engine failed ({failure.message}); GET {check[0]} for it.",
                               extra={"outcome": "applied", "check": check}) from None
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
        remember_for(entry, response.headers["ETag"])
    response.status_code = status
    return response


def answer_document(path: str, jsonld_type: str, members: dict[str, Any], *, status: int = 200,
                    cache_control: str = "no-cache") -> Response:
    """A sub-resource (or other non-detail) answer: ``{@context, @id: path, @type, ...members}``. A write
    answering the representation of its own URL (a sub-resource PUT/PATCH, no ``rollout``) carries that
    representation's ETag, remembered like a GET's, so the next write can send it in ``If-Match``."""
    base = respond.base_path()
    body = envelope(base, path, jsonld_type)
    body.update(members)
    response = respond.document(body, status=status, cache_control=cache_control)
    if request.method in ("PUT", "PATCH") and path == request.path and "rollout" not in members:
        response.headers["ETag"] = compute_etag(response.get_data(), response.mimetype or "")
        record_issued(request, response.headers["ETag"])
    return response


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
    if kind not in (ResourceKind.SERVICE, ResourceKind.NODE, ResourceKind.CONFIG, ResourceKind.SECRET):
        raise ValueError(f"{kind.value} objects have no versioned spec")
    check_spec(before, new_spec, write_bounds())   # API018 before anything reaches the engine
    pinned = idempotency.pinned_version(kind.value, entry.id)   # a retry of an unknown outcome: same base
    version = pinned or int(((entry.raw.get("Version") or {}).get("Index")) or 0)
    labels.refuse_reserved_changes(before, new_spec)   # API017: stack membership is not a label edit
    if dry_run.active():
        return dry_run.update(op, entry, new_spec, rollback=rollback)
    engine = writer()
    prefs = preferences()
    engine_write(op, kind, entry.id, functools.partial(_update_spec, engine, entry, version, before, new_spec,
                                                       rollback, pinned is not None), version=version)
    rollout = None
    extra: tuple[str, ...] = ()
    if kind is ResourceKind.SERVICE and prefs.wait is not None:
        rollout = wait_settled(engine, entry.id, prefs.wait, expects_update=rollback or changes_tasks(before, new_spec),
                               previous_start=started_at(entry.raw), stop=current_runtime().draining)
        extra = (f"wait={prefs.wait:g}",)
    fresh = read_back(op, kind, entry.id)
    build = answer or (lambda e, r: answer_detail(e, members={"rollout": r} if r else None))
    return minimal_or(lambda: build(fresh, rollout), extra_applied=extra)


def _update_spec(engine: EngineWriter, entry: Entry, version: int, read: dict[str, Any], new_spec: dict[str, Any],
                 rollback: bool, pinned: bool = False) -> None:
    """The versioned update. The engine also bumps an object's version for changes of its own (a service's
    rolling-update progress), so an update refused as out of sequence is retried once, with the engine's
    current version, when the engine's spec is still the one the change was computed from: nobody else
    changed it (the same test If-Match passed: the spec, not the version, is what a client read). Otherwise
    the 409 stands. A ``pinned`` version (the retry of a write whose outcome was unknown) is never moved:
    that refusal is what keeps the change from happening twice."""
    try:
        engine.update_spec(entry.kind.value, entry.id, version, new_spec, rollback=rollback)
    except WriteFailure as failure:
        if failure.reason != "out_of_sequence" or pinned:
            raise
        current = engine.inspect(entry.kind.value, entry.id)
        if current.get("Spec") != read:
            raise
        fresh_version = int((current.get("Version") or {}).get("Index") or 0)
        engine.update_spec(entry.kind.value, entry.id, fresh_version, new_spec, rollback=rollback)
