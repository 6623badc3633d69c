"""The live metrics producer: initial then points on a fixed schedule, query_error on failures, one line
per body, skipped ticks while a call is in flight."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import gevent
import pytest

from app.metrics.params import QUERY, QUERY_RANGE, StreamPlan
from app.metrics.stream import error_data, metrics_producer, next_tick, one_line
from app.metrics.upstream import PrometheusClient, UpstreamError


class ScriptedClient(PrometheusClient):
    """Answers each call from a script (bytes, or an UpstreamError to raise); records the calls."""

    def __init__(self, answers: list[bytes | UpstreamError], delay: float = 0.0) -> None:
        super().__init__("http://prom.invalid")
        self.answers = answers
        self.delay = delay
        self.calls: list[tuple[Sequence[str], Sequence[tuple[str, str]]]] = []

    def get(self, segments: Sequence[str], params: Sequence[tuple[str, str]] = ()) -> bytes:
        self.calls.append((segments, params))
        gevent.sleep(self.delay)   # a deliberately slow Prometheus (the tests on overlapping ticks)
        answer = self.answers.pop(0) if self.answers else b'{"status":"success"}'
        if isinstance(answer, UpstreamError):
            raise answer
        return answer


def collect(client: PrometheusClient, plan: StreamPlan, count: int, timeout: float) -> list[bytes]:
    frames: list[bytes] = []
    producer = gevent.spawn(metrics_producer(client, plan), frames.append)
    deadline = time.monotonic() + timeout
    while len(frames) < count and time.monotonic() < deadline:
        gevent.sleep(0.01)   # the poll interval of this bounded wait (what arrived is returned for the asserts)
    producer.kill()
    return frames


def test_initial_then_points_each_step() -> None:
    client = ScriptedClient([b'{"status":"success",\n "data":{"resultType":"matrix"}}',
                             b'{"status":"success","data":{"resultType":"vector"}}'])
    started = time.monotonic()
    frames = collect(client, StreamPlan("up", 1, 60), 3, 5)
    assert frames[0] == b'event: initial\ndata: {"status":"success", "data":{"resultType":"matrix"}}\n\n'
    assert frames[1] == b'event: point\ndata: {"status":"success","data":{"resultType":"vector"}}\n\n'
    assert frames[2].startswith(b"event: point\n")
    assert 1.8 <= time.monotonic() - started < 3
    assert [segments for segments, _ in client.calls[:3]] == [QUERY_RANGE, QUERY, QUERY]
    assert not any(frame.startswith(b"id:") or b"\nid:" in frame for frame in frames)


def test_failures_become_query_error_events_and_the_ticks_go_on() -> None:
    failure = UpstreamError("MTR002", "Prometheus is unreachable: Connection refused.")
    client = ScriptedClient([failure, UpstreamError("MTR002", "Prometheus answered 400: bad", "bad_data"),
                             b'{"status":"success"}'])
    frames = collect(client, StreamPlan("up", 1, 60), 3, 5)
    assert frames[0] == (b'event: query_error\ndata: {"error":"Prometheus is unreachable: Connection refused.",'
                         b'"errorType":"server_error"}\n\n')
    assert json.loads(frames[1].split(b"data: ")[1]) == {"error": "Prometheus answered 400: bad",
                                                          "errorType": "bad_data"}
    assert frames[2] == b'event: point\ndata: {"status":"success"}\n\n'


def test_ticks_that_pass_during_a_slow_call_are_skipped() -> None:
    client = ScriptedClient([], delay=1.5)    # each call takes 1.5 steps
    frames = collect(client, StreamPlan("up", 1, 60), 3, 6)
    assert len(frames) == 3
    assert len(client.calls) <= 4            # never two calls at once, never a backlog


@pytest.mark.parametrize(("elapsed", "tick"), [(0.0, 1), (0.99, 1), (1.0, 2), (3.5, 4), (14.9, 1), (15.0, 2)])
def test_next_tick(elapsed: float, tick: int) -> None:
    assert next_tick(elapsed, 15 if elapsed >= 10 else 1) == tick


def test_error_data_and_one_line() -> None:
    assert error_data(UpstreamError("MTR002", "x")) == b'{"error":"x","errorType":"server_error"}'
    assert one_line(b'{\r\n "a": 1\n}') == b'{ "a": 1}'
