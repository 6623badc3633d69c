"""Nanosecond timestamps as integers: RFC 3339 in and out, Go-style durations, and the log cursor.

Why integers: the engine stamps every line with nine fractional digits and ``datetime`` keeps six, so two
lines of one microsecond would compare equal and the cursor (last line + 1 ns) could not be computed. An
``int`` of nanoseconds since the Unix epoch (UTC) orders, subtracts and adds exactly.
"""

from __future__ import annotations

import calendar
import re
import time

NS_PER_SECOND = 1_000_000_000

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9})\d*)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": NS_PER_SECOND,
            "m": 60 * NS_PER_SECOND, "h": 3600 * NS_PER_SECOND}


class TimeFormatError(ValueError):
    """Neither an RFC 3339 timestamp nor a duration."""


def parse_rfc3339(text: str) -> int:
    """``2026-04-13T08:12:34.123456789Z`` (any offset, 0 to 9 fractional digits; more are truncated) → ns."""
    match = _RFC3339.match(text.strip())
    if match is None:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        raise TimeFormatError(f"not a valid date and time: {text!r}")
    seconds = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
    if time.gmtime(seconds)[:3] != (year, month, day):   # 31 February: timegm normalises silently
        raise TimeFormatError(f"not a valid date: {text!r}")
    fraction = (match.group(7) or "").ljust(9, "0")
    if match.group(9):
        offset = (int(match.group(10)) * 60 + int(match.group(11))) * 60
        seconds -= offset if match.group(9) == "+" else -offset
    return seconds * NS_PER_SECOND + int(fraction)


def format_rfc3339(ns: int) -> str:
    """ns → ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``: always nine digits, so the text sorts like the number."""
    seconds, fraction = divmod(ns, NS_PER_SECOND)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


def parse_duration(text: str) -> int:
    """A Go duration (``1h30m``, ``90s``, ``1.5h``, ``250ms``, ``0``) → ns; no sign (always looks back)."""
    text = text.strip()
    if text == "0":
        return 0
    position, total = 0, 0.0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            raise TimeFormatError(f"not a duration: {text!r}")
        total += float(match.group(1)) * _UNIT_NS[match.group(2)]
        position = match.end()
    if position == 0:
        raise TimeFormatError(f"not a duration: {text!r}")
    return int(total)


def parse_instant(text: str, now_ns: int) -> int:
    """A query time: an RFC 3339 timestamp, or a duration meaning that long before ``now_ns``."""
    try:
        return parse_rfc3339(text)
    except TimeFormatError:
        return now_ns - parse_duration(text)


def cursor_after(ns: int) -> str:
    """The agent cursor: the instant 1 ns after a line's timestamp (the carry crosses seconds exactly)."""
    return format_rfc3339(ns + 1)


def engine_since(ns: int) -> str:
    """The engine's ``since`` parameter (``<seconds>.<nanoseconds>``, inclusive)."""
    seconds, fraction = divmod(ns, NS_PER_SECOND)
    return f"{seconds}.{fraction:09d}"


def now_ns() -> int:
    return time.time_ns()
