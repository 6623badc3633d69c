"""The OpenAPI document and the server agree on the parameters a fuzzer finds hard (docs/api-documents.md):
feed parameters are checked on every representation of a URL that documents them, the ``action`` pattern
allows the blanks the server strips, the log instants' pattern is what the parser takes, and an empty label
name is not an operation of its own."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ProblemError
from app.history.selection import ACTION_PATTERN, check_feed_parameters, parse_actions
from app.logs.schemas import INSTANT_PATTERN
from app.logs.timestamps import MAX_NS, MIN_NS, TimeFormatError, parse_instant
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

SEARCHED = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
NOW_NS = 1_795_000_000 * 1_000_000_000       # 2026-11-18


@pytest.fixture(scope="module")
def running() -> Iterator[Harness]:
    harness = build_harness(FakeEngine(cluster()))
    harness.start()
    try:
        yield harness
    finally:
        harness.stop()


def _code(harness: Harness, url: str, **headers: str) -> tuple[int, Any]:
    response = harness.app.test_client().get(url, headers=headers)
    body = response.get_json(force=True, silent=True)
    return response.status_code, body.get("code") if isinstance(body, dict) else None


def _feed_urls(harness: Harness) -> list[str]:
    """Every URL of an operation documenting ``action`` (the feed parameters): lists, ``/search``, ``/events``,
    ``/history`` and, for details, one service."""
    client = harness.app.test_client()
    service = client.get("/services?limit=1").get_json()["items"][0]["@id"]
    paths = [path for path, operations in client.get("/api").get_json()["paths"].items()
             if any(p.get("name") == "action" for p in operations.get("get", {}).get("parameters", []))]
    urls = [service if path == "/services/{id}" else path for path in paths if "{" not in path
            or path == "/services/{id}"]
    assert {"/services", "/search", "/history", "/events", service} <= set(urls), urls
    return urls


@pytest.mark.parametrize(("query", "code"), [("before=-1", "API012"), ("before=abc", "API012"),
                                             ("action=created", "API012"), ("action=", "API012")])
def test_a_bad_feed_parameter_is_refused_by_json_as_by_the_feed(running: Harness, query: str, code: str) -> None:
    for url in _feed_urls(running):
        if url == "/events":      # its JSON is 406 API002: only the feed and the stream remain
            continue
        q = f"{url}?{query}" + ("&q=web" if url == "/search" else "")
        assert _code(running, q) == (400, code), q
        assert _code(running, q.replace(url, url + ".atom", 1)) == (400, code), q
        assert _code(running, q, Accept="application/feed+json") == (400, code), q


def test_events_refuses_a_bad_feed_parameter_before_its_406(running: Harness) -> None:
    assert _code(running, "/events?before=0") == (400, "API012")
    assert _code(running, "/events?before=5") == (406, "API002")


def test_good_feed_parameters_leave_the_json_answer_alone(running: Harness) -> None:
    for url in _feed_urls(running):
        if url == "/events":
            continue
        q = f"{url}?before=99&action=%20create%20,update" + ("&q=web" if url == "/search" else "")
        status, _ = _code(running, q)
        assert status == 200, q


@SEARCHED
@given(st.from_regex(ACTION_PATTERN))
def test_every_action_value_the_pattern_allows_is_parsed(text: str) -> None:
    assert parse_actions(text)
    check_feed_parameters({"action": text})


@SEARCHED
@given(st.text(alphabet=st.sampled_from(" \t\u3000,createupdaemovf_x"), max_size=40))
def test_an_action_value_outside_the_pattern_is_refused(text: str) -> None:
    if re.search(ACTION_PATTERN, text) is None:
        with pytest.raises(ProblemError):
            parse_actions(text)
    else:
        assert parse_actions(text)


@SEARCHED
@given(st.from_regex(INSTANT_PATTERN))
def test_every_instant_the_log_pattern_allows_is_parsed(text: str) -> None:
    assert MIN_NS <= parse_instant(text, NOW_NS) <= MAX_NS      # never the parser's TimeFormatError/RangeError


@pytest.mark.parametrize("text", ["1h30m", "0", " 90s ", ".5h", "250ms", "3µs", "2026-04-13T08:12:34.123456789Z",
                                  "2024-02-29t00:00:00+01:00", "2000-02-29 23:59:60z", "1970-01-01T00:00:00+00:00",
                                  "1970-01-01T00:00:00-05:00", "9999-12-31T23:59:59+14:00"])
def test_instants_both_take(text: str) -> None:
    assert re.search(INSTANT_PATTERN, text)
    parse_instant(text, NOW_NS)


@pytest.mark.parametrize("text", ["", " ", "1969-12-31T23:59:59Z", "2023-02-29T00:00:00Z", "2100-02-29T00:00:00Z",
                                  "2026-04-31T00:00:00Z", "2026-04-13T24:00:00Z", "2026-04-13T08:12:34+24:00",
                                  "10000-01-01T00:00:00Z", "1h-30m", "h", "1d", "2026-04-13", "now"])
def test_instants_both_refuse(text: str) -> None:
    assert re.search(INSTANT_PATTERN, text) is None
    with pytest.raises(TimeFormatError):
        parse_instant(text, NOW_NS)


def test_the_duration_pattern_never_reaches_before_1970() -> None:
    longest = "99999.9h" * 4
    assert re.search(INSTANT_PATTERN, longest)
    assert parse_instant(longest, time.time_ns()) > 0
    assert re.search(INSTANT_PATTERN, longest + "1h") is None     # a fifth part


def test_log_parameters_carry_the_instant_pattern(running: Harness) -> None:
    document = running.app.test_client().get("/api").get_json()
    for path in ("/services/{service_id}/logs", "/tasks/{task_id}/logs", "/stacks/{name}/logs"):
        parameters = {p["name"]: p["schema"] for p in document["paths"][path]["get"]["parameters"]}
        assert all(parameters[name] == {"type": "string", "pattern": INSTANT_PATTERN}
                   for name in ("after", "since", "before")), path
        assert {"type": "string"} in [{"type": s.get("type")} for s in parameters["limit"]["anyOf"]]


def test_an_empty_label_name_is_not_an_operation_but_is_refused(running: Harness) -> None:
    document = running.app.test_client().get("/api").get_json()
    assert "/metrics/labels/" not in document["paths"]
    (name,) = document["paths"]["/metrics/labels/{name}"]["parameters"]
    assert name["schema"]["minLength"] == 1 and re.search(name["schema"]["pattern"], " \u3000") is None
    assert _code(running, "/metrics/labels/") == (400, "MTR006")
    assert _code(running, "/metrics/labels/%20%E3%80%80") == (400, "MTR006")
