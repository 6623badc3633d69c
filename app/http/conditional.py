"""ETag (SHA-256 of the body, per negotiated variant), Last-Modified, If-Range, and the 304 answer.

Runs in one after_request hook for every buffered 200/206 response, so no view computes validators.
``If-None-Match`` (lists, ``W/``, ``*``) wins over ``If-Modified-Since`` (second precision).

The ETag is the full SHA-256 hex of the body, quoted (choice: the whole hash, not a 16-byte
prefix). One URL has several variants with the same body (``application/json``
and ``application/vnd.service.v1+json``), and RFC 9110 §8.8.3 wants a distinct tag per variant: the
default ``application/json`` gets the bare hash, any other Content-Type gets ``-<subtype>`` appended
(``"<hex>-vnd.service.v1+json"``).

Every tag issued on a writable object's URL is remembered with the object's state
(:mod:`app.http.issued_tags`), so ``If-Match`` on a write can be judged by the object, not by the bytes
(:func:`parse_if_match` reads the header; ``app.http.writes`` judges it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime

from flask import Request, Response
from werkzeug.exceptions import RequestedRangeNotSatisfiable
from werkzeug.http import parse_date

from app.http.issued_tags import record_issued

_DEFAULT_VARIANT = "application/json"
# Buffered bodies that get an ETag: JSON and the feeds (Atom, JSON Feed).
_VALIDATED = frozenset({"application/json", "application/ld+json", "application/atom+xml", "application/feed+json"})


def compute_etag(body: bytes, mimetype: str = _DEFAULT_VARIANT) -> str:
    suffix = "" if mimetype in ("", _DEFAULT_VARIANT) else "-" + mimetype.partition("/")[2]
    return '"' + hashlib.sha256(body).hexdigest() + suffix + '"'


def has_validators(response: Response) -> bool:
    """Whether the hook below gives this response an ETag (buffered JSON and feed bodies)."""
    if response.is_streamed or response.direct_passthrough:
        return False
    mimetype = response.mimetype or ""
    return mimetype in _VALIDATED or mimetype.startswith("application/vnd.")


def ranged_or_full(render: Callable[[str | None], Response], range_header: str | None,
                   if_range: str | None) -> Response:
    """The answer to a Range request under ``If-Range`` (RFC 9110 §13.1.5). ``render(range)`` builds the
    response for a Range header (None: the whole representation) and may raise 416.

    The validator is the *selected representation*'s: the response this URL gives without ``Range`` (the
    ETag of a 200 of the same URL and query). When it holds, the Range is applied (206, or 416 when it
    cannot be satisfied); else the Range is ignored and the whole representation is a 200. A 206 carries
    the ETag of its own body, so that tag is accepted too for the same Range (a client replaying a 206
    it holds): it names exactly the slice it asks for. Each call renders at most two bodies."""
    if not range_header or if_range is None:
        return render(range_header)
    full = render(None)
    if if_range_holds(if_range, full):
        return render(range_header)
    try:
        ranged = render(range_header)
    except RequestedRangeNotSatisfiable:
        return full
    return ranged if ranged.status_code == 206 and if_range_holds(if_range, ranged) else full


def if_range_holds(header: str, response: Response) -> bool:
    """RFC 9110 §13.1.5: a strong ETag equal to this response's, or a date equal to its Last-Modified
    (lists have none, so a date never holds there). A weak tag never holds."""
    header = header.strip()
    if header.startswith('"'):
        return has_validators(response) and header == compute_etag(response.get_data(), response.mimetype or "")
    if header.startswith("W/"):
        return False
    since = parse_date(header)
    modified = response.last_modified
    return since is not None and modified is not None and since == modified.replace(microsecond=0)


_ENGINE_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?")


def parse_engine_time(text: str) -> datetime | None:
    """Engine timestamps carry nanoseconds (``2026-11-23T09:12:34.123456789Z``), which Python cannot
    parse, and volumes carry the engine host's offset (``…+02:00``): keep the seconds, honour the offset
    (none means UTC)."""
    match = _ENGINE_TIME.fullmatch(text.strip()) if text else None
    if match is None:
        return None
    seconds, offset = match.groups()
    try:
        parsed = datetime.fromisoformat(seconds + ("+00:00" if offset in (None, "Z") else offset))
    except ValueError:
        return None
    return parsed.astimezone(UTC)


def _etag_matches(header: str, etag: str) -> bool:
    if header.strip() == "*":
        return True
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


_LIST_ELEMENT = re.compile(r'[ \t]*(?:(W/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(,|$)')


def parse_if_match(header: str) -> list[str] | None:
    """RFC 9110 §13.1.1 ``If-Match = "*" / #entity-tag``: None for ``*``, else the tags as sent (``W/``
    kept; empty list elements skipped). Raises ``ValueError`` naming the flaw for anything else, e.g. an
    unquoted tag or ``"a", *`` (``*`` is only valid alone: mixed in a list it is malformed, not "any")."""
    if header.strip() == "*":
        return None
    tags: list[str] = []
    position = 0
    while position < len(header):
        match = _LIST_ELEMENT.match(header, position)
        if match is None or match.end() == position:
            rest = header[position:position + 40].strip()
            if rest.startswith("*"):
                raise ValueError("'*' is only valid alone, not in a list of entity tags.")
            raise ValueError(f"not a comma-separated list of quoted entity tags at {rest!r}.")
        if match.group(2) is not None:
            tags.append((match.group(1) or "") + '"' + match.group(2) + '"')
        position = match.end()
    if not tags:
        raise ValueError("no entity tag in the header.")
    return tags


def apply_conditional(request: Request, response: Response) -> Response:
    if request.method not in ("GET", "HEAD") or response.status_code not in (200, 206):
        return response
    if not has_validators(response):
        return response
    etag = compute_etag(response.get_data(), response.mimetype or "")
    response.headers["ETag"] = etag
    record_issued(request, etag)
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        if _etag_matches(if_none_match, etag):
            return _not_modified(response)
        return response
    since = request.if_modified_since
    modified = response.last_modified
    if since is not None and modified is not None and modified.replace(microsecond=0) <= since:
        return _not_modified(response)
    return response


def _not_modified(response: Response) -> Response:
    kept = {name: value for name, value in response.headers.items()
            if name.lower() not in ("content-type", "content-length", "content-range")}
    not_modified = Response(status=304)
    for name, value in kept.items():
        not_modified.headers[name] = value
    return not_modified
