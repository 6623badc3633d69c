"""The three answers of a log URL: the JSON page, the plain-text download, the live tail (SSE).

Called by the thin views of ``app.blueprints.logs`` with a function that resolves the URL's targets from
the cache (404 when missing). Parameters are validated before anything touches the engine.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request
from werkzeug.datastructures import MIMEAccept

from app.engine.logs import LogTarget
from app.http import respond
from app.http.jsonld import envelope
from app.http.live import live_response
from app.http.negotiation import HTML, JSON, JSON_LD, JSON_V1, SSE
from app.logs.facility import log_facility
from app.logs.labels import Labeller
from app.logs.page import Selection, log_page_bytes, text_body
from app.logs.params import parse_log_query
from app.logs.reading import read_once
from app.logs.tailing import close_all, open_follow, tail_producer
from app.logs.timestamps import now_ns
from app.runtime import current_runtime

TEXT = "text/plain"
TargetsOf = Callable[[], list[LogTarget]]


def wants_text(accept: MIMEAccept) -> bool:
    """Whether ``text/plain`` is the best match among what a log URL offers (``*/*`` still means JSON)."""
    ranges = MIMEAccept([(value.split(";", 1)[0].strip().lower(), quality) for value, quality in accept])
    return ranges.best_match([JSON, JSON_V1, JSON_LD, HTML, SSE, TEXT]) == TEXT


def _one_shot(targets_of: TargetsOf) -> Selection:
    query = parse_log_query(request.args, now_ns(), live=False)
    targets = targets_of()
    selection = read_once(log_facility().engine, targets, query)
    Labeller(current_runtime().cache).label_all(selection.lines)
    return selection


def json_page(targets_of: TargetsOf) -> Response:
    selection = _one_shot(targets_of)
    data = log_page_bytes(selection, envelope(respond.base_path(), request.path, "LogResponse"))
    return respond.encoded_document(data, cache_control="no-store")


def text_download(targets_of: TargetsOf, filename: str) -> Response:
    selection = _one_shot(targets_of)
    response = Response(text_body(selection), content_type="text/plain; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}.log"'
    return response


def live_tail(targets_of: TargetsOf) -> Response:
    """Slot (or 429 LOG001) → engine follow streams (or LOG008) → the SSE response."""
    last_event_id = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    query = parse_log_query(request.args, now_ns(), live=True, last_event_id=last_event_id)
    targets = targets_of()
    facility = log_facility()
    if request.method == "HEAD":
        return live_response(facility.slots, lambda emit: None)
    if facility.slots.open >= facility.slots.cap:
        facility.slots.acquire()        # refuses (429 LOG001) before any engine stream is opened
    since = query.start if query.start is not None else now_ns()
    readers = open_follow(facility.engine, targets, since, query.stream)
    try:
        return live_response(facility.slots, tail_producer(readers, query, Labeller(current_runtime().cache)),
                             keepalive=facility.keepalive)
    except BaseException:
        close_all(readers)
        raise
