"""Nanosecond timestamps, durations and the cursor arithmetic (app.logs.timestamps)."""

from __future__ import annotations

import pytest

from app.logs.timestamps import (
    MAX_NS,
    NS_PER_SECOND,
    TimeFormatError,
    TimeRangeError,
    cursor_after,
    engine_since,
    format_rfc3339,
    parse_duration,
    parse_instant,
    parse_rfc3339,
)

EPOCH_2026 = 1_775_000_000  # some second in 2026


def test_nanoseconds_survive_a_round_trip() -> None:
    text = "2026-04-13T08:12:34.123456789Z"
    ns = parse_rfc3339(text)
    assert ns % NS_PER_SECOND == 123_456_789
    assert format_rfc3339(ns) == text


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-04-13T08:12:34Z", "2026-04-13T08:12:34.000000000Z"),
    ("2026-04-13T08:12:34.5Z", "2026-04-13T08:12:34.500000000Z"),
    ("2026-04-13T10:12:34.000000001+02:00", "2026-04-13T08:12:34.000000001Z"),
    ("2026-04-13T06:42:34-01:30", "2026-04-13T08:12:34.000000000Z"),
    ("2026-04-13t08:12:34.1234567891234z", "2026-04-13T08:12:34.123456789Z"),   # >9 digits truncated
])
def test_rfc3339_forms_normalise_to_utc_with_nine_digits(text: str, expected: str) -> None:
    assert format_rfc3339(parse_rfc3339(text)) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2026-04-13", "2026-04-13T08:12:34", "2026-02-30T00:00:00Z",
                                  "2026-13-01T00:00:00Z", "2026-04-13T25:00:00Z", "2026-04-13T08:12:34.Z"])
def test_invalid_timestamps_are_refused(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_rfc3339(text)


def test_the_cursor_is_one_nanosecond_later() -> None:
    assert cursor_after(parse_rfc3339("2026-04-13T08:12:34.123456789Z")) == "2026-04-13T08:12:34.123456790Z"


def test_the_cursor_carries_across_the_second_and_day_boundary() -> None:
    assert cursor_after(parse_rfc3339("2026-04-13T08:12:34.999999999Z")) == "2026-04-13T08:12:35.000000000Z"
    assert cursor_after(parse_rfc3339("2026-12-31T23:59:59.999999999Z")) == "2027-01-01T00:00:00.000000000Z"


def test_formatted_timestamps_sort_like_their_numbers() -> None:
    values = [EPOCH_2026 * NS_PER_SECOND + offset for offset in (0, 1, 999_999_999, 1_000_000_000, 10)]
    assert sorted(values) == sorted(values, key=format_rfc3339)
    assert [format_rfc3339(v) for v in sorted(values)] == sorted(format_rfc3339(v) for v in values)


@pytest.mark.parametrize(("text", "ns"), [
    ("1h30m", 5400 * NS_PER_SECOND), ("90s", 90 * NS_PER_SECOND), ("1.5h", 5400 * NS_PER_SECOND),
    ("250ms", 250_000_000), ("2h45m10s", (2 * 3600 + 45 * 60 + 10) * NS_PER_SECOND), ("0", 0),
    ("10us", 10_000), ("10µs", 10_000), ("7ns", 7),
])
def test_go_durations(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "h", "1", "1d", "-5m", "1h 30m", "1.2.3s", "m5"])
def test_invalid_durations_are_refused(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_duration(text)


def test_an_instant_is_a_timestamp_or_a_duration_before_now() -> None:
    now = EPOCH_2026 * NS_PER_SECOND
    assert parse_instant("1h30m", now) == now - 5400 * NS_PER_SECOND
    assert parse_instant("2026-04-13T08:12:34Z", now) == parse_rfc3339("2026-04-13T08:12:34Z")


def test_engine_since_keeps_nanoseconds() -> None:
    assert engine_since(1_700_000_000 * NS_PER_SECOND + 5) == "1700000000.000000005"


@pytest.mark.parametrize("text", ["2026-04-13T08:12:34+24:00", "2026-04-13T08:12:34-00:60",
                                  "2026-04-13T08:12:34+99:99"])
def test_offsets_must_be_a_real_hour_and_minute(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_rfc3339(text)


@pytest.mark.parametrize("text", ["1969-12-31T23:59:59.999999999Z", "0000-01-01T00:00:00Z",
                                  "9999-12-31T23:59:59-00:01"])
def test_instants_outside_the_epoch_to_9999_are_a_range_error(text: str) -> None:
    with pytest.raises(TimeRangeError):
        parse_rfc3339(text)


def test_durations_reaching_before_the_epoch_or_overflowing_are_a_range_error() -> None:
    now = EPOCH_2026 * NS_PER_SECOND
    with pytest.raises(TimeRangeError):
        parse_instant("100000000h", now)
    with pytest.raises(TimeRangeError):
        parse_duration("9" * 400 + "h")
    assert parse_instant("9999-12-31T23:59:59.999999999Z", now) == MAX_NS
    assert parse_instant(f"{EPOCH_2026}s", now) == 0
