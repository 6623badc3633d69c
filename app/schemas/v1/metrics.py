"""Version-1 schemas of the metrics endpoints (docs/metrics.md): query parameters for the document,
Prometheus's own envelope (proxied verbatim), and the service's ``/metrics/status`` and ``/cluster/metrics``
documents, which ``app.metrics`` builds."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, fields

from app.metrics.params import RANGE_DEFAULT, STEP_DEFAULT, STEP_MAX, STEP_MIN
from app.schemas.query_params import NOT_BLANK
from app.schemas.v1.envelopes import JsonLdV1


class MetricsQueryV1(Schema):
    query = fields.String(required=True, metadata={"description": "PromQL expression; required (MTR003 when "
                                                                  "missing or blank)", "pattern": NOT_BLANK})
    time = fields.String(metadata={"description": "JSON: instant evaluation time (RFC 3339 or unix seconds), "
                                                  "passed through"})
    start = fields.String(metadata={"description": "JSON: with end, a range query (RFC 3339 or unix seconds)"})
    end = fields.String(metadata={"description": "JSON: with start, a range query (RFC 3339 or unix seconds)"})
    step = fields.String(metadata={
        "description": "JSON range query: Prometheus duration or seconds, passed through. Stream: integer "
                       f"seconds {STEP_MIN}..{STEP_MAX} (default {STEP_DEFAULT}, MTR004 otherwise), also "
                       "the tick interval"})
    timeout = fields.String(metadata={"description": "JSON: Prometheus evaluation timeout, passed through"})
    range = fields.String(metadata={"description": "Stream: look-back of the initial event in integer seconds "
                                                   f"(default {RANGE_DEFAULT}; ≤0 or invalid → default); "
                                                   "ignored in JSON"})


class LabelsQueryV1(Schema):
    match = fields.List(fields.String(), data_key="match[]", metadata={
        "description": "series selector, repeatable; forwarded"})
    start = fields.String(metadata={"description": "forwarded (RFC 3339 or unix seconds)"})
    end = fields.String(metadata={"description": "forwarded (RFC 3339 or unix seconds)"})


class LabelValuesQueryV1(Schema):
    match = fields.List(fields.String(), data_key="match[]", metadata={
        "description": "series selector, repeatable; forwarded"})


class PrometheusAnswerV1(Schema):
    """Prometheus's HTTP API envelope, proxied verbatim."""

    class Meta:
        unknown = INCLUDE

    status = fields.String(required=True, metadata={"description": "success (errors become MTR002 problems)"})
    data = fields.Raw(metadata={"description": "query: {resultType, result}; labels: a list of strings"})
    warnings = fields.List(fields.String())
    infos = fields.List(fields.String())


class ExporterCoverageV1(Schema):
    targets = fields.Integer(required=True, metadata={"description": "distinct scrape targets (instance)"})
    nodes = fields.Integer(required=True, metadata={
        "description": "node-exporter: distinct host names; cAdvisor: distinct swarm node ids on containers"})


class MetricsStatusV1(JsonLdV1):
    prometheusConfigured = fields.Boolean(required=True)
    prometheusReachable = fields.Boolean(required=True)
    error = fields.String(metadata={"description": "why Prometheus could not be asked (when it could not)"})
    nodeExporter = fields.Nested(ExporterCoverageV1, required=True, allow_none=True)
    cadvisor = fields.Nested(ExporterCoverageV1, required=True, allow_none=True)


class UsageV1(Schema):
    used = fields.Float(required=True, metadata={"description": "cpu: cores; memory, disk: bytes"})
    total = fields.Float(required=True, metadata={"description": "cpu: cores; memory, disk: bytes"})
    percent = fields.Float(required=True, metadata={"description": "used / total x 100, two decimals"})


class ClusterMetricsV1(JsonLdV1):
    cpu = fields.Nested(UsageV1, required=True, allow_none=True, metadata={
        "description": "cores busy over the last minute (null without node-exporter series)"})
    memory = fields.Nested(UsageV1, required=True, allow_none=True, metadata={
        "description": "MemTotal - MemAvailable"})
    disk = fields.Nested(UsageV1, required=True, allow_none=True, metadata={
        "description": "root filesystem: size - available"})
