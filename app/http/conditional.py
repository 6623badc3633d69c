"""ETag (SHA-256 of the body), Last-Modified, and the 304 answer to conditional GETs.

Runs in one after_request hook for every buffered 200/206 response, so no view computes validators.
``If-None-Match`` (lists, ``W/``, ``*``) wins over ``If-Modified-Since`` (second precision).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from flask import Request, Response


def compute_etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


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
    bare = etag.strip('"')
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate.strip('"') == bare:
            return True
    return False


def apply_conditional(request: Request, response: Response) -> Response:
    if request.method not in ("GET", "HEAD") or response.status_code not in (200, 206):
        return response
    if response.is_streamed or response.direct_passthrough:
        return response
    mimetype = response.mimetype or ""
    if mimetype not in ("application/json", "application/ld+json") and not mimetype.startswith("application/vnd."):
        return response
    etag = compute_etag(response.get_data())
    response.headers["ETag"] = etag
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
