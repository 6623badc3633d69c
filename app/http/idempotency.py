"""``Idempotency-Key`` on writes (draft-ietf-httpapi-idempotency-key-header): a retried write applies once.

Called by ``app.http.writes.begin`` after the level and ACL checks, before the view reads anything:

- The key is an RFC 8941 string (``"..."``; a bare token is accepted too) of 1 to 255 visible ASCII
  characters, else 400 ``API019``. Keys are scoped per caller identity.
- The request's fingerprint is SHA-256 over (identity, method, path with query, body bytes).
- Unknown key: the request runs; its answer is committed to the store (durably, before it goes out) and
  replayed to any later request with the same key and fingerprint, marked ``Idempotent-Replayed: true``.
- Same key, other fingerprint: 422 ``API020``. Same key while the first is still running: 409 ``API021``
  with ``Retry-After``.
- A first request whose outcome is unknown (504 ``ENG005``, or a worker that died during the engine call)
  is not replayed: the retry runs again, but against the object version the first was computed from
  (``pin``), so the engine refuses whichever of the two comes second (out of sequence) and the change
  cannot happen twice.
- Answers of 5xx other than 504 (the engine was unreachable: nothing was applied) are not kept: the key
  is free for the retry.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from flask import Response, abort, after_this_request, current_app, g, request

from app.errors import ProblemError
from app.http.request_id import current_request_id
from app.runtime import current_runtime
from app.store.idempotency import KeyRecord, KeyStore, MemoryKeys, SqliteKeys, with_outcome

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255
MAX_BODY = 1024 * 1024   # app.http.writes.MAX_BODY: a larger body is refused (413) before it matters
# Headers of an answer that are part of its meaning, kept and replayed with its body.
KEPT_HEADERS = ("Content-Type", "Location", "ETag", "Preference-Applied", "Retry-After", "Accept-Patch",
                "Content-Location")
_STORE_KEY = "shoal.idempotency"
_IN_FLIGHT_KEY = "shoal.idempotency.inflight"
STALE_IN_FLIGHT = 900.0   # seconds after which an in-flight mark is ignored (its greenlet must be gone)


@dataclass(frozen=True, slots=True)
class Claim:
    record: KeyRecord
    is_retry_of_unknown: bool


def parse_key(value: str) -> str:
    """The key of the header's value (an sf-string, or lenient: the bare value).

    :raises ProblemError: ``API019``.
    """
    text = value.strip()
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise ProblemError("API019", detail="Idempotency-Key: an unterminated quoted string.")
        text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if not 1 <= len(text) <= MAX_KEY or any(not 0x20 <= ord(ch) < 0x7F for ch in text):
        raise ProblemError("API019", detail=f"Idempotency-Key must be 1 to {MAX_KEY} visible ASCII characters "
                                            f"(got {len(text)} characters).")
    return text


def fingerprint(identity: str, method: str, target: str, body: bytes) -> str:
    digest = hashlib.sha256()
    for part in (identity.encode(), method.encode(), target.encode()):
        digest.update(len(part).to_bytes(4, "big") + part)
    digest.update(body)
    return digest.hexdigest()


def keys() -> KeyStore:
    """The app's key store, made on first use: the state store's file when persistence is on and the
    persister has the file open, else memory."""
    app_extensions = current_app.extensions
    store = app_extensions.get(_STORE_KEY)
    if store is None:
        runtime = current_runtime()
        settings = runtime.settings
        if runtime.store is not None and runtime.store.active:
            store = SqliteKeys(runtime.store.path, settings.writes_idempotency_ttl,
                               settings.writes_idempotency_max_keys)
        else:
            store = MemoryKeys(settings.writes_idempotency_ttl, settings.writes_idempotency_max_keys)
        app_extensions[_STORE_KEY] = store
    result: KeyStore = store
    return result


def _in_flight() -> dict[tuple[str, str], float]:
    marks: dict[tuple[str, str], float] = current_app.extensions.setdefault(_IN_FLIGHT_KEY, {})
    return marks


def _body() -> bytes | None:
    """The body's bytes, read once (bounded) and put back for the view; None when too large to matter."""
    length = request.content_length
    if length is not None and length > MAX_BODY:
        return None
    try:
        data = request.stream.read(MAX_BODY + 1)
    except (OSError, ValueError):
        return None
    request.__dict__["stream"] = io.BytesIO(data)   # werkzeug's cached stream: the view reads the same bytes
    return None if len(data) > MAX_BODY else data


def claim(identity: str) -> None:
    """Start a keyed write, or end it here: replay (the stored answer), 422 ``API020`` or 409 ``API021``.
    Without the header this does nothing."""
    value = request.headers.get(HEADER)
    if value is None:
        return
    key = parse_key(value)
    body = _body()
    if body is None:
        return   # the view answers 413; nothing to keep
    target = request.path + ("?" + request.query_string.decode("latin-1") if request.query_string else "")
    print_ = fingerprint(identity, request.method, target, body)
    marks = _in_flight()
    started = marks.get((identity, key))
    now = time.monotonic()
    if started is not None and now - started < STALE_IN_FLIGHT:
        raise ProblemError("API021", headers={"Retry-After": "1"},
                           detail=f"A request with Idempotency-Key {key!r} is still being processed.")
    if len(marks) >= 1024:   # marks are removed as answers go out; drop any a lost greenlet left behind
        for stale in [mark for mark, since in marks.items() if now - since >= STALE_IN_FLIGHT]:
            del marks[stale]
    marks[(identity, key)] = now   # before the store is read: that read yields to other greenlets
    try:
        stored = keys().get(identity, key)
        if stored is not None and stored.fingerprint != print_:
            raise ProblemError("API020", detail=f"Idempotency-Key {key!r} was used for a different request "
                                                "(method, URL, body or caller); nothing was written.")
        if stored is not None and stored.state == "done":
            abort(replay(stored))
    except BaseException:
        marks.pop((identity, key), None)
        raise
    # A retry of an unknown outcome is the same logical write: it keeps the first request's id (the audit
    # of the change, whichever attempt made it, names that id) and its pin.
    record = KeyRecord(identity, key, print_, "started", time.time(),
                       stored.request_id if stored is not None else current_request_id(),
                       pin=stored.pin if stored is not None else None)
    g.idempotency = Claim(record, stored is not None)

    @after_this_request
    def finish(response: Response) -> Response:
        return _finish(response)


def replay(record: KeyRecord) -> Response:
    response = Response(record.body, status=record.status)
    response.headers.pop("Content-Type", None)
    for name, value in record.headers:
        response.headers[name] = value
    response.headers[REPLAYED] = "true"
    return response


def logical_request_id() -> str | None:
    """The request id of the write this request is (a retry of an unknown outcome: the first one's)."""
    claimed: Claim | None = g.get("idempotency")
    return claimed.record.request_id if claimed is not None else None


def pinned_version(kind: str, object_id: str) -> int | None:
    """The version a retry of an unknown outcome must write against (None: use the current one)."""
    claimed: Claim | None = g.get("idempotency")
    pin = claimed.record.pin if claimed is not None else None
    if pin is None or pin.get("kind") != kind or pin.get("id") != object_id:
        return None
    version = pin.get("version")
    return version if isinstance(version, int) else None


def engine_call_starting(kind: str | None, object_id: str | None, version: int | None) -> None:
    """Record, durably, that the engine call of a keyed write starts (and the version it is based on):
    if the worker dies before answering, the retry knows the outcome is unknown."""
    claimed: Claim | None = g.get("idempotency")
    if claimed is None:
        return
    record = claimed.record
    if record.pin is None and kind is not None and object_id is not None and version is not None:
        record = replace(record, pin={"kind": kind, "id": object_id, "version": version})
    g.idempotency = Claim(record, claimed.is_retry_of_unknown)
    _store_safely(record, sync=False)


def _finish(response: Response) -> Response:
    claimed: Claim | None = g.pop("idempotency", None)
    if claimed is None:
        return response
    record = claimed.record
    try:
        if response.status_code == 504:
            _store_safely(with_outcome(record, "unknown"))
        elif response.status_code >= 500 or response.is_streamed:
            _delete_safely(record)
        else:
            headers = tuple((name, response.headers[name]) for name in KEPT_HEADERS if name in response.headers)
            _store_safely(with_outcome(record, "done", status=response.status_code, headers=headers,
                                       body=response.get_data()))
    finally:
        _in_flight().pop((record.scope, record.key), None)
    return response


def _store_safely(record: KeyRecord, *, sync: bool = True) -> None:
    try:
        keys().put(record, sync=sync)
    except Exception as exc:   # the write itself happened: answer it, but say the key was not kept
        log.error("idempotency key not stored", extra={"error": f"{type(exc).__name__}: {exc}",
                                                       "request_id": current_request_id()})


def _delete_safely(record: KeyRecord) -> None:
    try:
        keys().delete(record.scope, record.key)
    except Exception as exc:
        log.error("idempotency key not released", extra={"error": f"{type(exc).__name__}: {exc}",
                                                         "request_id": current_request_id()})


def close(extensions: dict[str, Any]) -> None:
    store = extensions.pop(_STORE_KEY, None)
    if store is not None:
        store.close()

