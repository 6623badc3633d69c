"""The live metrics stream (docs/metrics.md): a producer for ``app.http.live.live_response``.

On connect, ``initial`` carries Prometheus's range answer over ``now-range..now`` at ``step``; then every
``step`` seconds ``point`` carries an instant answer at that moment. Both are Prometheus's bodies verbatim
(line breaks, which valid JSON only has between tokens, are removed so that one body is one ``data:``
line). A failed call becomes a ``query_error`` event and the ticks go on (Prometheus may come back).
Ticks keep to a fixed schedule from the connect time; a tick that comes due while the previous query is
still in flight is skipped, not queued, so one stream never has two calls open. No ``id:`` lines: a
reconnecting client gets a fresh ``initial``.
"""

from __future__ import annotations

import json
import math
import time

import gevent

from app.http.live import Emit, Producer, frame
from app.metrics.params import StreamPlan, UpstreamCall
from app.metrics.upstream import PrometheusClient, UpstreamError

DEFAULT_ERROR_TYPE = "server_error"


def metrics_producer(client: PrometheusClient, plan: StreamPlan) -> Producer:
    def produce(emit: Emit) -> None:
        started = time.monotonic()
        emit(_event(client, "initial", plan.initial(time.time())))
        tick = 1
        while True:
            delay = started + tick * plan.step - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            emit(_event(client, "point", plan.point(time.time())))
            tick = max(tick + 1, next_tick(time.monotonic() - started, plan.step))

    return produce


def next_tick(elapsed: float, step: int) -> int:
    """The first tick still ahead after ``elapsed`` seconds (ticks that passed meanwhile are skipped)."""
    return math.floor(elapsed / step) + 1


def error_data(exc: UpstreamError) -> bytes:
    """``{"error": ..., "errorType": ...}``: Prometheus's own errorType when it sent one."""
    body = {"error": exc.detail, "errorType": exc.error_type or DEFAULT_ERROR_TYPE}
    return json.dumps(body, separators=(",", ":")).encode()


def _event(client: PrometheusClient, name: str, call: UpstreamCall) -> bytes:
    try:
        body = client.get(call.segments, call.params)
    except UpstreamError as exc:
        return frame(error_data(exc), event="query_error")
    return frame(one_line(body), event=name)


def one_line(body: bytes) -> bytes:
    return body.replace(b"\r", b"").replace(b"\n", b"")
