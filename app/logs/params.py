"""Query parameters of the log endpoints (docs/logs.md) → ``LogQuery``, or the LOG00x problem.

``after`` keeps lines strictly newer than it (lines ≤ ``after`` are dropped). ``since``, the name the
agent tool uses, is its inclusive twin: lines older than ``since`` are dropped, so the cursor (last line
+ 1 ns) given back as ``since`` returns exactly the lines not yet seen, even one 1 ns after the last.
``after`` wins when both are given. Instants must lie between 1970 and 9999 and UTC offsets be real
(``+23:59`` at most): anything else is the parameter's 400 before the engine is asked. On a live stream
without either, ``Last-Event-ID`` (a line timestamp, as sent in ``id:``) is the exclusive start; without
any, only new lines are streamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.errors import ProblemError
from app.logs.lines import STREAMS, LogLine
from app.logs.timestamps import TimeFormatError, TimeRangeError, parse_instant, parse_rfc3339

DEFAULT_LIMIT = 500
MAX_LIMIT = 10_000
FILTERED_FACTOR = 10      # with after/before, ask the engine for limit x 10 lines (≤ MAX_LIMIT), then filter


@dataclass(frozen=True, slots=True)
class LogQuery:
    limit: int = DEFAULT_LIMIT
    start: int | None = None          # lines older than this are dropped (inclusive lower bound, ns)
    before: int | None = None         # lines at or after this are dropped (ns)
    stream: str | None = None         # "stdout" | "stderr" | None for both
    given_start: bool = False         # start came from the request (after/since/Last-Event-ID)

    @property
    def engine_tail(self) -> int:
        """How many lines to ask the engine for (per task: the engine applies ``tail`` to each)."""
        if self.start is not None or self.before is not None:
            return min(self.limit * FILTERED_FACTOR, MAX_LIMIT)
        return self.limit

    def keeps(self, line: LogLine) -> bool:
        return ((self.start is None or line.ns >= self.start)
                and (self.before is None or line.ns < self.before)
                and (self.stream is None or line.stream == self.stream))


def parse_limit(value: str | None) -> int:
    try:
        limit = int(value) if value is not None else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT
    return DEFAULT_LIMIT if limit <= 0 else min(limit, MAX_LIMIT)


def parse_log_query(args: Mapping[str, str], now_ns: int, *, live: bool,
                    last_event_id: str | None = None) -> LogQuery:
    """Validate in the order of codes of docs/logs.md: stream (LOG002), after (LOG003), before (LOG004/005)."""
    stream = args.get("stream")
    if stream is not None and stream not in STREAMS:
        raise ProblemError("LOG002", detail=f"stream must be stdout or stderr, not {stream!r}.")
    start = _start(args, now_ns, last_event_id if live else None)
    before_text = args.get("before")
    before = None
    if before_text is not None:
        if live:
            raise ProblemError("LOG005", detail="A live log stream has no end: drop before.")
        try:
            before = parse_instant(before_text, now_ns)
        except TimeRangeError as exc:
            raise ProblemError("LOG004", detail=f"before: {exc}.") from None
        except TimeFormatError:
            raise ProblemError("LOG004", detail=f"before={before_text!r} is neither an RFC 3339 timestamp "
                                                "nor a duration such as 1h30m.") from None
    return LogQuery(limit=parse_limit(args.get("limit")), start=start, before=before, stream=stream,
                    given_start=start is not None)


def _start(args: Mapping[str, str], now_ns: int, last_event_id: str | None) -> int | None:
    starts: list[int] = []
    for name, exclusive in (("after", True), ("since", False)):
        text = args.get(name)
        if text is None:
            continue
        try:     # both checked, even when after wins: a bad since is refused, never silently ignored
            instant = parse_instant(text, now_ns)
        except TimeRangeError as exc:   # checked here: the engine answered a 500 with its internals
            raise ProblemError("LOG003", detail=f"{name}: {exc}.") from None
        except TimeFormatError:
            raise ProblemError("LOG003", detail=f"{name}={text!r} is neither an RFC 3339 timestamp nor a "
                                                "duration such as 1h30m.") from None
        starts.append(instant + 1 if exclusive else instant)
    if starts:
        return starts[0]
    if last_event_id:
        try:
            return parse_rfc3339(last_event_id) + 1
        except TimeFormatError:
            return None     # not one of our ids: start from now, as without one
    return None
