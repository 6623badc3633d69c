"""Which Prometheus call a /metrics request becomes: allow-listed parameters, MTR003/MTR004/MTR006, units."""

from __future__ import annotations

import pytest

from app.metrics.params import (
    QUERY,
    QUERY_RANGE,
    RANGE_DEFAULT,
    STEP_DEFAULT,
    ParamError,
    StreamPlan,
    json_call,
    label_values_call,
    labels_call,
    parse_range,
    parse_step,
    stream_plan,
)


def getter(**values: str):  # type: ignore[no-untyped-def]
    return values.get


def test_an_instant_query_forwards_query_time_and_timeout_only() -> None:
    call = json_call(getter(query="up", time="1700000000", timeout="5s", step="15", range="60", foo="x"))
    assert call.segments == QUERY
    assert call.params == (("query", "up"), ("time", "1700000000"), ("timeout", "5s"))


def test_start_and_end_together_make_a_range_query() -> None:
    call = json_call(getter(query="up", start="1", end="2", step="1m", time="3", range="60"))
    assert call.segments == QUERY_RANGE
    assert call.params == (("query", "up"), ("start", "1"), ("end", "2"), ("step", "1m"))


def test_start_without_end_stays_an_instant_query() -> None:
    call = json_call(getter(query="up", start="1"))
    assert call.segments == QUERY
    assert call.params == (("query", "up"),)


@pytest.mark.parametrize("query", [None, "", "   "])
def test_a_missing_or_blank_query_is_mtr003(query: str | None) -> None:
    values = {} if query is None else {"query": query}
    for build in (json_call, stream_plan):
        with pytest.raises(ParamError) as caught:
            build(getter(**values))
        assert caught.value.code == "MTR003"


@pytest.mark.parametrize(("text", "step"), [(None, STEP_DEFAULT), ("5", 5), ("300", 300), (" 60 ", 60)])
def test_stream_steps_are_integer_seconds_from_5_to_300(text: str | None, step: int) -> None:
    assert parse_step(text) == step


@pytest.mark.parametrize("text", ["4", "301", "x", "", "15.0", "-5", "1e1", "0"])
def test_other_stream_steps_are_mtr004(text: str) -> None:
    with pytest.raises(ParamError) as caught:
        parse_step(text)
    assert caught.value.code == "MTR004"


@pytest.mark.parametrize(("text", "seconds"), [(None, RANGE_DEFAULT), ("60", 60), ("0", RANGE_DEFAULT),
                                               ("-5", RANGE_DEFAULT), ("x", RANGE_DEFAULT),
                                               ("1.5", RANGE_DEFAULT), ("86400", 86400)])
def test_stream_range_is_integer_seconds_else_the_default(text: str | None, seconds: int) -> None:
    assert parse_range(text) == seconds


def test_a_stream_plan_asks_a_range_then_instants_in_seconds() -> None:
    plan = stream_plan(getter(query="up", step="30", range="600"))
    assert plan == StreamPlan("up", 30, 600)
    initial = plan.initial(1000.5)
    assert initial.segments == QUERY_RANGE
    assert initial.params == (("query", "up"), ("start", "400.500"), ("end", "1000.500"), ("step", "30"))
    point = plan.point(1030.25)
    assert point.segments == QUERY
    assert point.params == (("query", "up"), ("time", "1030.250"))


def test_labels_forward_every_match_and_start_end() -> None:
    get_all = {"match[]": ["up", 'node_uname_info{job="node"}']}.get
    call = labels_call(getter(start="1", end="2", query="dropped"), lambda name: get_all(name) or [])
    assert call.segments == ("api", "v1", "labels")
    assert call.params == (("match[]", "up"), ("match[]", 'node_uname_info{job="node"}'), ("start", "1"),
                           ("end", "2"))


def test_label_values_forward_match_only_and_name_the_label_in_the_path() -> None:
    call = label_values_call("job", lambda name: ["up"] if name == "match[]" else [])
    assert call.segments == ("api", "v1", "label", "job", "values")
    assert call.params == (("match[]", "up"),)


@pytest.mark.parametrize("name", ["", " "])
def test_a_blank_label_name_is_mtr006(name: str) -> None:
    with pytest.raises(ParamError) as caught:
        label_values_call(name, lambda _: [])
    assert caught.value.code == "MTR006"
