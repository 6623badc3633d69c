"""Which Prometheus call a ``/metrics`` request becomes, and with which parameters (docs/metrics.md).

Only documented parameters are forwarded (an allow-list per call), each once (the first value), except
``match[]`` on the label calls, which is repeatable. Values are passed through unchecked where
Prometheus is the judge (``time``, ``start``, ``end``, JSON ``step``, ``timeout``): Prometheus judges them and
its message comes back in an ``MTR002`` problem. The stream's own ``step`` and ``range`` are integer seconds
checked here. Raises :class:`ParamError` with the problem code; the HTTP layer turns it into a problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

QUERY: Final = ("api", "v1", "query")
QUERY_RANGE: Final = ("api", "v1", "query_range")
LABELS: Final = ("api", "v1", "labels")

STEP_DEFAULT: Final = 15
STEP_MIN: Final = 5
STEP_MAX: Final = 300
RANGE_DEFAULT: Final = 3600

_INSTANT_PARAMS: Final = ("query", "time", "timeout")
_RANGE_PARAMS: Final = ("query", "start", "end", "step", "timeout")
_INTEGER = re.compile(r"[0-9]+")

Getter = Callable[[str], str | None]          # first value of a query parameter, or None
ListGetter = Callable[[str], list[str]]        # every value of a repeatable parameter


class ParamError(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """An API path below the Prometheus base URL and the parameters to send."""

    segments: tuple[str, ...]
    params: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A metrics stream: ``initial`` is a range query over ``range_seconds`` at ``step``; then one instant
    query every ``step`` seconds."""

    query: str
    step: int
    range_seconds: int

    def initial(self, now: float) -> UpstreamCall:
        return UpstreamCall(QUERY_RANGE, (("query", self.query), ("start", _seconds(now - self.range_seconds)),
                                          ("end", _seconds(now)), ("step", str(self.step))))

    def point(self, now: float) -> UpstreamCall:
        return UpstreamCall(QUERY, (("query", self.query), ("time", _seconds(now))))


def require_query(get: Getter) -> str:
    query = get("query")
    if query is None or not query.strip():
        raise ParamError("MTR003", "Pass a PromQL expression in the query parameter.")
    return query


def json_call(get: Getter) -> UpstreamCall:
    """Instant query, or a range query when both ``start`` and ``end`` are given."""
    require_query(get)
    is_range = get("start") is not None and get("end") is not None
    names = _RANGE_PARAMS if is_range else _INSTANT_PARAMS
    params = tuple((name, value) for name in names if (value := get(name)) is not None)
    return UpstreamCall(QUERY_RANGE if is_range else QUERY, params)


def stream_plan(get: Getter) -> StreamPlan:
    query = require_query(get)
    return StreamPlan(query, parse_step(get("step")), parse_range(get("range")))


def parse_step(text: str | None) -> int:
    """Integer seconds 5..300, default 15; anything else is ``MTR004`` (it is also the tick interval)."""
    if text is None:
        return STEP_DEFAULT
    value = text.strip()
    if not _INTEGER.fullmatch(value) or not STEP_MIN <= int(value) <= STEP_MAX:
        raise ParamError("MTR004", f"step must be an integer number of seconds from {STEP_MIN} to {STEP_MAX}; "
                                   f"got {text[:40]!r}.")
    return int(value)


def parse_range(text: str | None) -> int:
    """Integer seconds of look-back; missing, non-integer or ≤ 0 means the default (3600)."""
    value = (text or "").strip()
    if not re.fullmatch(r"[+-]?[0-9]+", value) or int(value) <= 0:
        return RANGE_DEFAULT
    return int(value)


def labels_call(get: Getter, get_all: ListGetter) -> UpstreamCall:
    params = [("match[]", match) for match in get_all("match[]")]
    params += [(name, value) for name in ("start", "end") if (value := get(name)) is not None]
    return UpstreamCall(LABELS, tuple(params))


def label_values_call(name: str, get_all: ListGetter) -> UpstreamCall:
    if not name.strip():
        raise ParamError("MTR006", "Name the label in the path, e.g. /metrics/labels/job.")
    return UpstreamCall(("api", "v1", "label", name, "values"),
                        tuple(("match[]", match) for match in get_all("match[]")))


def _seconds(moment: float) -> str:
    """Unix seconds with millisecond precision, as Prometheus accepts and answers them."""
    return f"{moment:.3f}"

