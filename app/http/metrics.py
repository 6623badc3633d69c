"""HTTP side of the metrics proxy (docs/metrics.md): request parameters in, problems and
responses out; the calls themselves are in ``app.metrics``.

Order of checks on ``/metrics``: the request's own parameters first (``MTR003``, ``MTR004``: a bad request
is bad whether or not Prometheus is configured), then the configuration (``MTR001``), then the stream cap
(``MTR005``). Proxied answers (``/metrics``, ``/metrics/labels*``) are Prometheus's bodies verbatim; the
service's own documents (``/metrics/status``, ``/cluster/metrics``) carry the JSON-LD members. Every answer
that depends on Prometheus is ``Cache-Control: no-store``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from flask import Response, current_app, request

from app.errors import ProblemError
from app.http import respond
from app.http.jsonld import envelope
from app.http.live import live_response
from app.http.negotiation import current_representation
from app.metrics.params import ParamError, UpstreamCall, json_call, label_values_call, labels_call, stream_plan
from app.metrics.proxy import metrics_of
from app.metrics.status import metrics_status
from app.metrics.stream import metrics_producer
from app.metrics.upstream import PrometheusClient, UpstreamError
from app.metrics.usage import cluster_usage

NO_STORE = "no-store"
T = TypeVar("T")


def query() -> Response:
    """``GET /metrics`` as JSON: an instant or range query, Prometheus's answer verbatim."""
    call = _checked(lambda: json_call(request.args.get))
    return _proxied(call)


def stream(*_view: object) -> Response:
    """``GET /metrics`` as SSE: ``initial`` then a ``point`` per step (``app.metrics.stream``); called by
    ``negotiated`` with the view's arguments (the MethodView), which it does not need."""
    plan = _checked(lambda: stream_plan(request.args.get))
    client = _client()
    return live_response(metrics_of(current_app).slots, metrics_producer(client, plan))


def labels() -> Response:
    return _proxied(labels_call(request.args.get, request.args.getlist))


def label_values(name: str) -> Response:
    return _proxied(_checked(lambda: label_values_call(name, request.args.getlist)))


def status() -> Response:
    body = envelope(respond.base_path(), request.path, "MetricsStatus")
    body.update(metrics_status(metrics_of(current_app).client))
    return respond.document(body, cache_control=NO_STORE)


def cluster() -> Response:
    client = _client()
    try:
        usage = cluster_usage(client)
    except UpstreamError as exc:
        raise ProblemError(exc.code, detail=exc.detail) from None
    body = envelope(respond.base_path(), request.path, "ClusterMetrics")
    body.update(usage)
    return respond.document(body, cache_control=NO_STORE)


def _checked(build: Callable[[], T]) -> T:
    try:
        return build()
    except ParamError as exc:
        raise ProblemError(exc.code, detail=exc.detail) from None


def _client() -> PrometheusClient:
    client = metrics_of(current_app).client
    if client is None:
        raise ProblemError("MTR001", detail="Set prometheus.url (SERVICE_PROMETHEUS_URL) to enable metrics.")
    return client


def _proxied(call: UpstreamCall) -> Response:
    client = _client()
    try:
        body = client.get(call.segments, call.params)
    except UpstreamError as exc:
        raise ProblemError(exc.code, detail=exc.detail) from None
    response = Response(body, content_type=current_representation().content_type)
    response.headers["Cache-Control"] = NO_STORE
    return response
