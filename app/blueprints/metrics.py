"""``/metrics`` (Prometheus proxy: JSON or a live SSE stream), ``/metrics/status``, ``/metrics/labels``,
``/metrics/labels/{name}`` and ``/cluster/metrics`` (docs/metrics.md). The work is in
``app.http.metrics`` and ``app.metrics``.

The whole blueprint is exempt from the admission gate: its views wait on Prometheus (up to 30 s), and
holding the gate through that round-trip would stall every other reader for nothing. With an ACL policy
every view (and the live stream) needs the caller to hold at least one grant (docs/acl.md).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint as FlaskBlueprint
from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors
from app.http import admission
from app.http import metrics as views
from app.http.acl_read import require_grants
from app.http.negotiation import negotiated
from app.schemas.query_params import NOT_BLANK
from app.schemas.v1.metrics import (
    ClusterMetricsV1,
    LabelsQueryV1,
    LabelValuesQueryV1,
    MetricsQueryV1,
    MetricsStatusV1,
    PrometheusAnswerV1,
)

blp = Blueprint("metrics", __name__, description="Prometheus proxy: queries, live stream, labels, status.")
admission.exempt(blp)


def _granted_stream(*view: object) -> Response:
    require_grants()
    return views.stream(*view)

_UPSTREAM = {502: "Prometheus unreachable, timed out, too large an answer (10 MiB) or a non-2xx answer, "
                  "with Prometheus's message (MTR002).",
             503: "Prometheus is not configured (MTR001).",
             500: "Unexpected failure; the request to Prometheus could not be built (MTR007)."}
_STREAM_DOC: dict[str, Any] = {"responses": {
    200: {"content": {"text/event-stream": {"schema": {"type": "string", "description": (
        "Accept: text/event-stream. Events: initial (the range answer over now-range..now at step, verbatim), "
        "point (an instant answer each step, verbatim), query_error ({error, errorType}); no id lines; "
        ":keepalive after 15 s of silence")}}}},
    429: {"description": "Too many metrics streams (MTR005), with Retry-After: 5.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}},
}}


@blp.route("/metrics")
class Metrics(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": MetricsQueryV1}], **_STREAM_DOC)
    @blp.response(200, PrometheusAnswerV1, description="Prometheus's answer verbatim (instant, or range with "
                                                        "start and end); or the live stream.")
    @errors(blp, 400, 403, 429, 502, 503, codes={
        **_UPSTREAM, 400: "query missing (MTR003); stream step not an integer from 5 to 300 (MTR004).",
        429: "Too many metrics streams (MTR005); see Retry-After."})
    @negotiated(sse=_granted_stream)
    def get(self) -> Response:
        require_grants()
        return views.query()


@blp.route("/metrics/status")
class MetricsStatus(MethodView):
    @blp.response(200, MetricsStatusV1, description="Whether Prometheus is configured and reachable, and "
                                                     "which exporters it scrapes.")
    @errors(blp, 403)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return views.status()


@blp.route("/metrics/labels")
class MetricsLabels(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": LabelsQueryV1}])
    @blp.response(200, PrometheusAnswerV1, description="Label names, Prometheus's answer verbatim.")
    @errors(blp, 403, 502, 503, codes=_UPSTREAM)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return views.labels()


# A blank name is refused (MTR006), so the document asks for one character that is not white space.
@blp.route("/metrics/labels/<name>", parameters=[{"in": "path", "name": "name", "required": True, "schema": {
    "type": "string", "minLength": 1, "pattern": NOT_BLANK}}])
class MetricsLabelValues(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": LabelValuesQueryV1}])
    @blp.response(200, PrometheusAnswerV1, description="Values of one label, Prometheus's answer verbatim.")
    @errors(blp, 400, 403, 502, 503, codes={**_UPSTREAM, 400: "Label name blank (MTR006)."})
    @negotiated()
    def get(self, name: str) -> Response:
        require_grants()
        return views.label_values(name)


@negotiated()
def _label_unnamed() -> Response:
    """Never a label's values: the name is missing (400 MTR006). Not an operation of the OpenAPI document,
    where the name of ``/metrics/labels/{name}`` has at least one character: this URL is that path with an
    empty name, which the document calls invalid and the server refuses (docs/api-documents.md)."""
    require_grants()
    return views.label_values("")


FlaskBlueprint.add_url_rule(blp, "/metrics/labels/", "label_unnamed", _label_unnamed)  # undocumented


@blp.route("/cluster/metrics")
class ClusterMetrics(MethodView):
    @blp.response(200, ClusterMetricsV1, description="CPU, memory and root-disk use over every node-exporter "
                                                      "target.")
    @errors(blp, 403, 502, 503, codes=_UPSTREAM)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return views.cluster()
