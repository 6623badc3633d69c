"""Query parameters of the log endpoints → LogQuery or the LOG00x problem (app.logs.params)."""

from __future__ import annotations

import pytest

from app.errors import ProblemError
from app.logs.lines import LogLine
from app.logs.params import DEFAULT_LIMIT, MAX_LIMIT, parse_log_query
from app.logs.timestamps import NS_PER_SECOND, parse_rfc3339

NOW = 1_775_000_000 * NS_PER_SECOND
STAMP = "2026-04-13T08:12:34.123456789Z"


def query(live: bool = False, last_event_id: str | None = None, **args: str):  # type: ignore[no-untyped-def]
    return parse_log_query(args, NOW, live=live, last_event_id=last_event_id)


def code_of(live: bool = False, **args: str) -> str:
    with pytest.raises(ProblemError) as caught:
        parse_log_query(args, NOW, live=live)
    return caught.value.code


@pytest.mark.parametrize(("value", "limit"), [(None, DEFAULT_LIMIT), ("20", 20), ("0", DEFAULT_LIMIT),
                                              ("-3", DEFAULT_LIMIT), ("x", DEFAULT_LIMIT), ("99999", MAX_LIMIT)])
def test_limit(value: str | None, limit: int) -> None:
    args = {} if value is None else {"limit": value}
    assert parse_log_query(args, NOW, live=False).limit == limit


def test_engine_tail_is_limit_or_ten_times_it_when_filtering() -> None:
    assert query(limit="30").engine_tail == 30
    assert query(limit="30", after="1h").engine_tail == 300
    assert query(limit="5000", before="1h").engine_tail == MAX_LIMIT


def test_bad_parameters_have_their_codes() -> None:
    assert code_of(stream="both") == "LOG002"
    assert code_of(after="yesterday") == "LOG003"
    assert code_of(since="1 hour") == "LOG003"
    assert code_of(before="soon") == "LOG004"
    assert code_of(live=True, before="1h") == "LOG005"
    assert code_of(live=True, before="garbage") == "LOG005"


def test_after_is_exclusive_and_since_inclusive() -> None:
    ns = parse_rfc3339(STAMP)
    at, later = LogLine(ns, "stdout", "at"), LogLine(ns + 1, "stdout", "later")
    after, since = query(after=STAMP), query(since=STAMP)
    assert (after.keeps(at), after.keeps(later)) == (False, True)
    assert (since.keeps(at), since.keeps(later)) == (True, True)
    assert query(after=STAMP, since="2020-01-01T00:00:00Z").start == ns + 1   # after wins


def test_a_bad_since_is_refused_even_when_after_wins() -> None:
    assert code_of(after=STAMP, since="yesterday") == "LOG003"
    assert code_of(after=STAMP, since="1969-12-31T23:59:59Z") == "LOG003"


def test_durations_are_relative_to_now() -> None:
    assert query(after="1h30m").start == NOW - 5400 * NS_PER_SECOND + 1
    assert query(before="90s").before == NOW - 90 * NS_PER_SECOND


def test_before_is_exclusive_and_stream_filters() -> None:
    ns = parse_rfc3339(STAMP)
    q = query(before=STAMP, stream="stderr")
    assert not q.keeps(LogLine(ns, "stderr", ""))
    assert q.keeps(LogLine(ns - 1, "stderr", ""))
    assert not q.keeps(LogLine(ns - 1, "stdout", ""))


def test_last_event_id_starts_a_live_tail_unless_after_is_given() -> None:
    ns = parse_rfc3339(STAMP)
    assert query(live=True, last_event_id=STAMP).start == ns + 1
    assert query(live=True, last_event_id=STAMP, after="2020-01-01T00:00:00Z").start != ns + 1
    assert query(live=True, last_event_id="42").start is None          # not a line timestamp: only new lines
    assert query(live=False, last_event_id=STAMP).start is None         # JSON pages ignore it
    assert query(live=True).start is None


@pytest.mark.parametrize(("args", "code"), [
    ({"since": "100000000h"}, "LOG003"),              # before 1970: the engine answered a 500 with its internals
    ({"after": "9" * 400 + "h"}, "LOG003"),           # a float overflow (inf), not an OverflowError
    ({"since": "1969-12-31T23:59:59Z"}, "LOG003"),
    ({"after": "0000-01-01T00:00:00Z"}, "LOG003"),    # calendar.timegm's own ValueError
    ({"since": "2026-04-13T08:12:34+99:99"}, "LOG003"),
    ({"before": "2026-04-13T08:12:34-24:00"}, "LOG004"),
    ({"before": "2026-04-13T08:12:34+23:60"}, "LOG004"),
    ({"before": "100000000h"}, "LOG004"),
])
def test_instants_outside_the_epoch_or_with_unreal_offsets_are_the_parameters_400(args: dict[str, str],
                                                                                  code: str) -> None:
    with pytest.raises(ProblemError) as caught:
        query(**args)
    assert caught.value.code == code and caught.value.status == 400
    assert "Traceback" not in caught.value.detail and len(caught.value.detail) < 300


def test_real_offsets_and_the_epoch_itself_are_accepted() -> None:
    assert query(since="1970-01-01T00:00:00Z").start == 0
    assert query(after="2026-04-13T08:12:34+23:59").start == parse_rfc3339("2026-04-13T08:12:34+23:59") + 1
    assert query(since="1h").start == NOW - 3600 * NS_PER_SECOND
    assert query(live=True, last_event_id="1960-01-01T00:00:00Z").start is None   # not usable: only new lines
