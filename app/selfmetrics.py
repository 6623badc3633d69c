"""The service's own Prometheus metrics, on a per-app registry (tests build many apps in one process).

Request counts and latencies are recorded by two request hooks, with bounded labels: ``route`` is the
matched route template (``/services/{id}``) or ``unmatched``, ``method`` one of the HTTP methods the
service knows or ``other``; cache, watcher and stream figures are
read from the Runtime at scrape time by a collector, so the data path stays free of metric calls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from flask import Flask, Response, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.resources import ResourceKind
from app.runtime import runtime_of
from app.store.metrics import store_metrics
from app.streams.response import open_streams

_KEY = "shoal.metrics"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"


def route_label(rule: str | None) -> str:
    """``/services/<id>`` → ``/services/{id}`` (converters dropped: ``<path:x>`` → ``{x}``)."""
    if rule is None:
        return UNMATCHED
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def method_label(method: str) -> str:
    return method if method in _METHODS else "other"


class _RuntimeCollector(Collector):
    def __init__(self, app: Flask) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        runtime = runtime_of(self._app)
        cache, stats = runtime.cache, runtime.watcher.stats
        fresh = cache.freshness
        objects = GaugeMetricFamily("shoal_cache_objects", "Objects in the cache by kind.", labels=["kind"])
        for kind in ResourceKind:
            objects.add_metric([kind.value], cache.count(kind))
        yield objects
        yield CounterMetricFamily("shoal_engine_events", "Engine events received.",
                                  value=stats.events_received)
        yield CounterMetricFamily("shoal_full_syncs", "Full syncs completed.", value=stats.full_syncs)
        yield CounterMetricFamily("shoal_engine_reconnects", "Engine connection losses.",
                                  value=stats.reconnects)
        incidents = CounterMetricFamily(
            "shoal_watcher_incidents", "Watcher incidents by kind (buffer overflows, silent streams, inspect "
            "retries and abandons, stale engine answers refused, loop restarts, task listing failures, "
            "liveness probes the engine did not answer in time).",
            labels=["incident"])
        polls = runtime.watcher.task_poller.stats
        for name, value in (("buffer_overflow", stats.buffer_overflows), ("silent_stream", stats.silent_streams),
                            ("inspect_retry", stats.inspect_retries), ("inspect_abandoned", stats.inspects_abandoned),
                            ("stale_answer", stats.stale_answers), ("loop_restart", stats.loop_restarts),
                            ("stale_task_listing", polls.stale_listings), ("task_listing_failure", polls.failures),
                            ("probe_failure", stats.probe_failures)):
            incidents.add_metric([name], value)
        yield incidents
        listings = CounterMetricFamily("shoal_task_listings", "Task listings by scope (one service, or all).",
                                       labels=["scope"])
        listings.add_metric(["service"], polls.service_listings)
        listings.add_metric(["full"], polls.full_listings)
        yield listings
        yield CounterMetricFamily("shoal_task_count_polls", "Engine task-count polls (/services?status=true).",
                                  value=polls.counts_polls)
        yield GaugeMetricFamily("shoal_sync_duration_seconds", "Duration of the last full sync.",
                                value=stats.last_sync_duration or 0.0)
        yield GaugeMetricFamily("shoal_event_lag_seconds", "Engine event time to receipt, last event.",
                                value=stats.last_event_lag or 0.0)
        contact_age = 0.0 if fresh.last_contact is None else max(0.0, time.time() - fresh.last_contact)
        yield GaugeMetricFamily("shoal_engine_contact_age_seconds",
                                "Seconds since the last successful engine contact.", value=contact_age)
        yield GaugeMetricFamily("shoal_engine_connected", "1 while the engine connection is live.",
                                value=1.0 if fresh.connected else 0.0)
        yield GaugeMetricFamily("shoal_cache_sequence", "Sequence number of the latest cache change.",
                                value=fresh.seq)
        yield GaugeMetricFamily("shoal_open_streams", "Open streaming connections (SSE, logs, metrics).",
                                value=open_streams(self._app))
        yield from store_metrics(runtime.store_status())


class _RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("shoal_http_requests", "HTTP requests by route, method and status.",
                                ["route", "method", "status"], registry=registry)
        self.latency = Histogram("shoal_http_request_duration_seconds", "HTTP request latency by route.",
                                 ["route", "method"], registry=registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.observers: dict[tuple[str | None, str, int], Callable[[float | None], None]] = {}


def init_self_metrics(app: Flask) -> None:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_RuntimeCollector(app))
    metrics = _RequestMetrics(registry)
    app.extensions[_KEY] = (registry, metrics)

    @app.before_request
    def _start_timer() -> None:
        g.request_started = time.perf_counter()

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.get("request_started")
        observe = request_observer(app, request.url_rule.rule if request.url_rule is not None else None,
                                   request.method, response.status_code)
        observe(time.perf_counter() - started if isinstance(started, float) else None)
        return response


def request_observer(app: Flask, rule: str | None, method: str, status: int) -> Callable[[float | None], None]:
    """Count (and time) one more request of ``rule``: the label children are looked up once per route,
    method and status (bounded: the URL rules, the known methods, the statuses), for the hook above and for
    ``app.http.response_memo``, whose answers are made outside Flask's hooks."""
    metrics: _RequestMetrics = app.extensions[_KEY][1]
    key = (rule, method_label(method), status)
    known = metrics.observers.get(key)
    if known is not None:
        return known
    route = route_label(rule)
    counted, timed = metrics.requests.labels(route, key[1], str(status)), metrics.latency.labels(route, key[1])

    def observe(seconds: float | None) -> None:
        counted.inc()
        if seconds is not None:
            timed.observe(seconds)
    metrics.observers[key] = observe
    return observe


def register_collector(app: Flask, collector: Collector) -> None:
    """Another part's figures (the admission gate's) on this app's registry, read at scrape time."""
    registry, _ = app.extensions[_KEY]
    registry.register(collector)


def render_metrics(app: Flask) -> Response:
    registry, _ = app.extensions[_KEY]
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST.split(";")[0],
                    headers={"Cache-Control": "no-store"})
