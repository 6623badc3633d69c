"""Encode once: a JSON read whose answer cannot have changed is served from the bytes of the last one.

Why: a detail or a page of a list is a pure function of the URL, the ``Accept`` header, the caller's
identity, the ACL policy and the cache's content; computing it again (25 hooks, the query, the schema
dump, JSON encoding, the ETag's hash) cost 0.5 to 1.3 ms of the one worker per request, the same bytes each
time. The memo keeps the finished answer (status, headers, body, ETag included) per request key until
the cache's next change batch (``Cache.subscribe``: any change clears it whole, so nothing here reasons
about which object embeds which) or the next policy reload, and serves it as a WSGI layer in front of
Flask: only what differs per request is made again — ``Request-Id``, the freshness headers
(``Cache-Sequence``, ``Engine-Last-Contact``, ``Cache-Freshness``), the request metrics — and gunicorn
still writes its access line.

Which answers: only those a view offers (:func:`offer`: the resource details and collections, through
``app.http.respond``) to a plain ``GET`` that the memo let through, and only a 200 JSON document without
cookies, ``no-store`` or ``Content-Range``. Which requests: auth modes ``none``, ``headers`` and ``cert``
(the caller is proven per request by the mode's own provider, as the long way does, and the identity is
part of the key; ``oidc`` reads a session cookie and goes the long way), and no header that changes the
answer beyond the key: conditionals (``If-*``: the 304 logic stays in one place), ``Range``, ``Origin``
(CORS), cookies, stream and fragment headers. The key is the raw path, query string, ``Accept``, the
forwarded proto/host/prefix, the URL scheme and the identity. Bounded: at most
:data:`MAX_ENTRIES` answers and :data:`MAX_BYTES` of bodies, oldest first out.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from flask import Flask, Request, current_app, request

from app.auth.identity import AuthenticationFailed, Identity, LoginRequired, ProviderRefused
from app.cache.entries import Entry
from app.http.admission import EXEMPT, LIGHT, Busy, gate_of, route_mode
from app.http.auth import BYPASS_PREFIXES, PREMADE_KEY, provider_of
from app.http.freshness import freshness_headers
from app.http.issued_tags import issued_tags, written_object
from app.http.paths import is_meta
from app.http.request_id import HEADER as REQUEST_ID
from app.http.request_id import request_id_for
from app.runtime import Runtime
from app.selfmetrics import request_observer

MAX_ENTRIES = 2048
MAX_BYTES = 16 << 20
MAX_BODY = 1 << 20            # an answer over 1 MiB is computed each time (a full 10,000-task page)

_ELIGIBLE = "shoal.memo.eligible"
_OFFER = "shoal.memo.offer"
# Request headers whose presence sends the request the long way (their meaning is not in the key).
_BYPASS_HEADERS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE",
                   "HTTP_IF_RANGE", "HTTP_RANGE", "HTTP_ORIGIN", "HTTP_LAST_EVENT_ID", "HTTP_SHOAL_FRAGMENT",
                   "HTTP_COOKIE")
# Response headers made per request: never stored.
_PER_REQUEST = frozenset({"request-id", "cache-sequence", "engine-last-contact", "cache-freshness"})
_JSON_TYPES = ("application/json", "application/ld+json")


@dataclass(frozen=True, slots=True)
class Offer:
    """What a view tells the memo about its answer: the route (metrics label), the object whose tag a
    write's ``If-Match`` may quote (re-issued on every hit, as ``app.http.conditional`` does), and for an
    answer that depends on more than the cache's content, what else (``depends_on``, its value when made)."""

    route: str | None
    written: Entry | None
    depends_on: Callable[[], object] | None = None
    made_with: object = None
    no_store: bool = False
    gated: bool = True            # served in turn at the admission gate (a probe never waits there)
    light: bool = False           # in the gate's light lane (a detail), as on the long way


@dataclass(slots=True)
class Answer:
    headers: list[tuple[str, str]]
    body: bytes
    etag: str | None
    written: Entry | None
    observe: Callable[[float | None], None]
    depends_on: Callable[[], object] | None = None
    made_with: object = None
    fresh: bool = True            # the answer carries the freshness headers (a probe's does not)
    gated: bool = True
    light: bool = False


def offer(depends_on: Callable[[], object] | None = None, *, no_store: bool = False) -> None:
    """Called by a view whose answer depends only on the memo's key, the cache's content and, if given, the
    value of ``depends_on`` (the answer is made again when it changes). ``no_store``: the view's answer
    says ``Cache-Control: no-store`` to HTTP caches (a probe), yet it may be kept here."""
    environ = request.environ
    if environ.get(_ELIGIBLE):
        rule = request.url_rule
        mode = route_mode(current_app._get_current_object())  # type: ignore[attr-defined]
        environ[_OFFER] = Offer(rule.rule if rule is not None else None, written_object(request), depends_on,
                                depends_on() if depends_on is not None else None, no_store,
                                gated=not is_meta(request.path) and mode != EXEMPT, light=mode == LIGHT)


def _is_json(content_type: str) -> bool:
    mimetype = content_type.split(";", 1)[0].strip()
    return mimetype in _JSON_TYPES or (mimetype.startswith("application/vnd.") and mimetype.endswith("+json"))


class ResponseMemo:
    """The outermost WSGI layer of the app (see the module docstring)."""

    def __init__(self, inner: Callable[[dict[str, Any], Any], Iterable[bytes]], app: Flask,
                 runtime: Runtime) -> None:
        self.inner = inner
        self._app = app
        self._runtime = runtime
        self._answers: OrderedDict[tuple[object, ...], Answer] = OrderedDict()
        self._bytes = 0
        self._policy: object = None
        self._generation = 0
        self.hits = self.misses = 0
        runtime.cache.subscribe(lambda _changes: self.clear())

    def clear(self) -> None:
        self._answers.clear()
        self._bytes = 0
        self._generation += 1

    # ------------------------------------------------------------------------------------------ WSGI
    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        key = self._key(environ)
        if key is None:
            return self.inner(environ, start_response)
        policy = self._runtime.policy.policy
        if policy is not self._policy:
            self.clear()
            self._policy = policy
        answer = self._answers.get(key)
        if answer is not None and (answer.depends_on is None or answer.depends_on() == answer.made_with):
            return self._serve(key, answer, environ, start_response)
        self.misses += 1
        return self._compute(key, environ, start_response)

    def _key(self, environ: dict[str, Any]) -> tuple[object, ...] | None:
        mode = self._runtime.settings.auth_mode
        if environ.get("REQUEST_METHOD") != "GET" or mode == "oidc":
            return None
        for header in _BYPASS_HEADERS:
            if header in environ:
                return None
        path = environ.get("PATH_INFO", "")
        # /-/..., /api...: not authenticated by the long way either (the probes offer their answers)
        unauthenticated = mode == "none" or path.removeprefix(self._runtime.settings.base_path).startswith(
            BYPASS_PREFIXES)
        identity = None if unauthenticated else self._identity(environ)
        if not unauthenticated and identity is None:
            return None
        return (environ.get("SCRIPT_NAME", ""), path, environ.get("QUERY_STRING", ""),
                environ.get("HTTP_ACCEPT", ""), environ.get("HTTP_X_FORWARDED_PROTO", ""),
                environ.get("HTTP_X_FORWARDED_HOST", ""), environ.get("HTTP_X_FORWARDED_PREFIX", ""),
                environ.get("wsgi.url_scheme", ""), identity)

    def _identity(self, environ: dict[str, Any]) -> Identity | None:
        """The caller, proven as the long way proves it (headers from a trusted proxy, a client certificate),
        and handed to it (``PREMADE_KEY``) so a request is authenticated once; None when refused."""
        try:
            identity = provider_of(self._app).authenticate(Request(environ))
        except (AuthenticationFailed, ProviderRefused, LoginRequired) as refusal:
            environ[PREMADE_KEY] = refusal
            return None
        environ[PREMADE_KEY] = identity
        try:
            hash(identity)
        except TypeError:
            return None
        return identity

    def _compute(self, key: tuple[object, ...], environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        environ[_ELIGIBLE] = True
        seen: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen["status"], seen["headers"] = status, headers
            return start_response(status, headers, exc_info)

        generation = self._generation
        body = self.inner(environ, capture)
        made = environ.get(_OFFER)
        if not isinstance(made, Offer) or not seen.get("status", "").startswith("200 "):
            return body
        # a change batch or a policy reload during the view (it may yield) cleared the memo: what the view
        # computed may predate it
        if generation != self._generation or (key in self._answers and made.depends_on is None):
            return body
        try:
            data = b"".join(body)
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        stored = self._storable(seen["headers"], data, no_store=made.no_store)
        if stored is not None:
            fresh = any(name.lower() == "cache-sequence" for name, _ in seen["headers"])
            observe = request_observer(self._app, made.route, "GET", 200)
            self._store(key, Answer(stored, data, _header(stored, "etag"), made.written, observe,
                                    made.depends_on, made.made_with, fresh, made.gated, made.light))
        return [data]

    def _storable(self, headers: list[tuple[str, str]], data: bytes, *,
                  no_store: bool = False) -> list[tuple[str, str]] | None:
        if len(data) > MAX_BODY:
            return None
        kept = []
        for name, value in headers:
            lower = name.lower()
            if lower in ("set-cookie", "content-range") or (lower == "cache-control" and "no-store" in value
                                                              and not no_store):
                return None
            if lower == "content-type" and not _is_json(value):
                return None
            if lower not in _PER_REQUEST:
                kept.append((name, value))
        return kept

    def _store(self, key: tuple[object, ...], answer: Answer) -> None:
        replaced = self._answers.pop(key, None)
        if replaced is not None:
            self._bytes -= len(replaced.body)
        self._answers[key] = answer
        self._bytes += len(answer.body)
        while len(self._answers) > MAX_ENTRIES or self._bytes > MAX_BYTES:
            _, dropped = self._answers.popitem(last=False)
            self._bytes -= len(dropped.body)

    def _serve(self, key: tuple[object, ...], answer: Answer, environ: dict[str, Any],
               start_response: Any) -> Iterable[bytes]:
        started = time.perf_counter()
        if not answer.gated:   # /-/health: never gated, as on the long way (app.http.admission)
            self.hits += 1
            return self._answer(answer, environ, start_response, started)
        generation = self._generation
        # in turn with the computed reads, in the lane the long way takes (app.http.admission: details in
        # the light one): the hub still polls between two answers, so a crowd of keep-alive readers cannot
        # starve a new connection, and a crowd of list readers does not make a detail wait behind all of them
        try:
            ticket = gate_of(self._app).acquire(light=answer.light)
        except Busy:
            return self.inner(environ, start_response)   # the long way answers the 503 as usual
        if generation != self._generation:   # the cache changed while this request waited its turn
            ticket.release()
            self.misses += 1
            return self._compute(key, environ, start_response)
        self.hits += 1
        try:
            return self._answer(answer, environ, start_response, started)
        finally:
            ticket.release()

    def _answer(self, answer: Answer, environ: dict[str, Any], start_response: Any,
                started: float) -> Iterable[bytes]:
        fresh = freshness_headers(self._runtime.cache.freshness) if answer.fresh else []
        start_response("200 OK", [*answer.headers, *fresh,
                                  (REQUEST_ID, request_id_for(environ.get("HTTP_REQUEST_ID", "")))])
        if answer.etag is not None and answer.written is not None:
            issued_tags(self._app).reissue(answer.etag, answer.written)
        answer.observe(time.perf_counter() - started)
        return [answer.body]



def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name), None)


def init_response_memo(app: Flask, runtime: Runtime) -> None:
    app.wsgi_app = ResponseMemo(app.wsgi_app, app, runtime)  # type: ignore[method-assign]
