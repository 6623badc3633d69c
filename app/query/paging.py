"""Page requests from ``limit``/``offset`` or ``Range: items a-b``, following these rules (docs/read-api.md):
invalid numbers are ignored, ``limit`` is clamped to 200, query parameters win over Range, an
unsatisfiable range is a 416, a malformed one is ignored.

A number the client sends is ASCII digits only (``int()`` would also take ``+5``, `` 5``, ``5_0`` and
other scripts' digits) and is never converted whole: past 18 digits it is :data:`HUGE`, larger than any
collection, so a huge ``limit`` clamps, a huge ``offset`` is past the end (empty page), a huge Range start
is unsatisfiable (416) and a huge Range end reads to the end. No input reaches Python's int-conversion
limit (a 500 before).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from werkzeug.exceptions import RequestedRangeNotSatisfiable

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
_RANGE = re.compile(r"[ \t]*items[ \t]*=?[ \t]*([0-9]+)-([0-9]+)[ \t]*")
_DIGITS = re.compile(r"[0-9]+")
HUGE = 10**18            # stands for any number of more than 18 digits
_MAX_DIGITS = 18


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int
    offset: int
    range_requested: tuple[int, int] | None = None   # inclusive bounds from a Range header


class RangeNotSatisfiable(RequestedRangeNotSatisfiable):
    """416 carrying the total, so the handler can send ``Content-Range: items */total``."""

    def __init__(self, total: int | None = None) -> None:
        super().__init__(length=None, units="items")
        self.total = total


def client_int(text: str | None) -> int | None:
    """A non-negative integer the client sent as ASCII digits, :data:`HUGE` past 18 digits, else None."""
    if text is None or _DIGITS.fullmatch(text) is None:
        return None
    return _bounded(text)


def _bounded(digits: str) -> int:
    digits = digits.lstrip("0") or "0"
    return HUGE if len(digits) > _MAX_DIGITS else int(digits)


def parse_page(args: Mapping[str, str], range_header: str | None) -> PageRequest:
    limit = client_int(args.get("limit"))
    offset = client_int(args.get("offset"))
    valid_limit = limit is not None and limit > 0
    valid_offset = offset is not None and offset >= 0
    if not valid_limit and not valid_offset and range_header:
        requested = parse_range(range_header)
        if requested is not None:
            first, last = requested
            return PageRequest(min(last - first + 1, MAX_LIMIT), first, requested)
    return PageRequest(min(limit, MAX_LIMIT) if valid_limit and limit else DEFAULT_LIMIT,
                       offset if valid_offset and offset is not None else 0)


def parse_range(header: str) -> tuple[int, int] | None:
    """``items a-b`` → (a, b); a multi-range is unsatisfiable (416); anything malformed is ignored."""
    if not header.strip().startswith("items"):
        return None
    if "," in header:
        raise RangeNotSatisfiable()
    match = _RANGE.fullmatch(header)
    if match is None:
        return None
    first, last = _bounded(match.group(1)), _bounded(match.group(2))
    return (first, last) if first <= last else None


def content_range(first: int, count: int, total: int) -> str:
    return f"items {first}-{first + count - 1}/{total}"
