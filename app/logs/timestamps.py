"""Nanosecond timestamps as integers: RFC 3339 in and out, Go-style durations, and the log cursor.

Why integers: the engine stamps every line with nine fractional digits and ``datetime`` keeps six, so two
lines of one microsecond would compare equal and the cursor (last line + 1 ns) could not be computed. An
``int`` of nanoseconds since the Unix epoch (UTC) orders, subtracts and adds exactly.

Every instant parsed here lies between the Unix epoch and the end of year 9999 (:class:`TimeRangeError`
otherwise): the engine's ``since`` is seconds since the epoch, and a negative or overflowing value (a
duration such as ``100000000h`` reaching back before 1970) made it fail with its own internals in the message.
"""

from __future__ import annotations

import calendar
import math
import re
import time

NS_PER_SECOND = 1_000_000_000
MIN_NS = 0                                                      # 1970-01-01T00:00:00Z
MAX_NS = 253_402_300_800 * NS_PER_SECOND - 1                    # 9999-12-31T23:59:59.999999999Z

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9})\d*)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": NS_PER_SECOND,
            "m": 60 * NS_PER_SECOND, "h": 3600 * NS_PER_SECOND}


class TimeFormatError(ValueError):
    """Neither an RFC 3339 timestamp nor a duration."""


class TimeRangeError(TimeFormatError):
    """Well formed, but outside 1970-01-01 … 9999-12-31 (UTC)."""


_RANGE = "1970-01-01T00:00:00Z … 9999-12-31T23:59:59Z"


def _quote(text: str) -> str:
    """The value as a problem detail shows it: at most 40 characters of it."""
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _in_range(ns: int, text: str) -> int:
    if not MIN_NS <= ns <= MAX_NS:
        raise TimeRangeError(f"{_quote(text)} is outside {_RANGE}")
    return ns


def parse_rfc3339(text: str) -> int:
    """``2026-04-13T08:12:34.123456789Z`` (any offset, 0 to 9 fractional digits; more are truncated) → ns."""
    match = _RFC3339.match(text.strip())
    if match is None:
        raise TimeFormatError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        raise TimeFormatError(f"not a valid date and time: {text!r}")
    if year < 1970:     # calendar.timegm refuses year 0 with a ValueError of its own
        raise TimeRangeError(f"{_quote(text)} is outside {_RANGE}")
    seconds = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
    if time.gmtime(seconds)[:3] != (year, month, day):   # 31 February: timegm normalises silently
        raise TimeFormatError(f"not a valid date: {text!r}")
    fraction = (match.group(7) or "").ljust(9, "0")
    if match.group(9):
        hours, minutes = int(match.group(10)), int(match.group(11))
        if hours > 23 or minutes > 59:      # RFC 3339 §5.6: time-numoffset is a valid hour and minute
            raise TimeFormatError(f"not a valid UTC offset: {text!r}")
        offset = (hours * 60 + minutes) * 60
        seconds -= offset if match.group(9) == "+" else -offset
    return _in_range(seconds * NS_PER_SECOND + int(fraction), text)


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
    if not math.isfinite(total) or total > MAX_NS:     # 1e400h is inf: int() would raise OverflowError
        raise TimeRangeError(f"{_quote(text)} reaches back before 1970-01-01T00:00:00Z")
    return int(total)


def parse_instant(text: str, now_ns: int) -> int:
    """A query time: an RFC 3339 timestamp, or a duration meaning that long before ``now_ns``; both within
    the epoch … 9999 (:class:`TimeRangeError`)."""
    try:
        return parse_rfc3339(text)
    except TimeRangeError:
        raise
    except TimeFormatError:
        pass
    duration = parse_duration(text)
    if now_ns - duration < MIN_NS:
        raise TimeRangeError(f"{_quote(text)} reaches back before 1970-01-01T00:00:00Z")
    return now_ns - duration


def cursor_after(ns: int) -> str:
    """The agent cursor: the instant 1 ns after a line's timestamp (the carry crosses seconds exactly)."""
    return format_rfc3339(ns + 1)


def engine_since(ns: int) -> str:
    """The engine's ``since`` parameter (``<seconds>.<nanoseconds>``, inclusive)."""
    seconds, fraction = divmod(ns, NS_PER_SECOND)
    return f"{seconds}.{fraction:09d}"


def now_ns() -> int:
    return time.time_ns()
