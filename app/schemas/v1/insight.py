"""Version-1 schemas of ``/search`` and ``/recommendations`` with their finding fields
(docs/search-and-recommendations.md). They describe the bodies in the OpenAPI document; ``app.query.search`` and
``app.recommendations`` build them."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.query.search import KIND_ORDER, MAX_LIMIT, MAX_QUERY
from app.recommendations.checks import CHECK_IDS
from app.recommendations.findings import RESOURCE_TYPES, SCOPES, SEVERITIES
from app.recommendations.prometheus_checks import PROMETHEUS_CHECK_IDS
from app.schemas.query_params import PRINTABLE_NOT_BLANK, LenientInteger, choice_list_pattern
from app.schemas.v1.envelopes import JsonLdV1

_PLURALS = [kind.spec.plural for kind in KIND_ORDER]


class SearchQueryV1(Schema):
    q = fields.String(required=True, metadata={
        "description": f"text to find (trimmed, case-insensitive; blank SEA001, over {MAX_QUERY} characters "
                       "SEA002); matched against names, ids, images and labels",
        "pattern": PRINTABLE_NOT_BLANK, "maxLength": MAX_QUERY})
    limit = LenientInteger(f"results kept per kind: default 3; 0 or over {MAX_LIMIT} → {MAX_LIMIT}; negative or "
                           "not an integer → 3")


class SearchHitV1(Schema):
    id_ = fields.String(data_key="@id", required=True)
    id = fields.String(required=True, metadata={"description": "engine id; stacks and volumes: name"})
    name = fields.String(required=True, metadata={"description": "tasks: <service>.<slot>"})
    detail = fields.String(required=True, metadata={
        "description": "service/task: image without digest; stack: <n> services; node: <role>, <state>; "
                       "config/secret: creation time; network/volume: driver"})
    state = fields.String(metadata={"description": "service: running|updating|pending|failed; task: its state"})
    match = fields.String(required=True, validate=validate.OneOf(["exact", "prefix", "substring", "segment"]),
                          metadata={"description": "how the best field matched (the rank)"})


class SearchResultV1(JsonLdV1):
    query = fields.String(required=True)
    limit = fields.Integer(required=True)
    results = fields.Dict(keys=fields.String(validate=validate.OneOf(_PLURALS)),
                          values=fields.List(fields.Nested(SearchHitV1)), required=True, metadata={
                              "description": "per kind with a match, best first, at most limit"})
    counts = fields.Dict(keys=fields.String(validate=validate.OneOf(_PLURALS)), values=fields.Integer(),
                         required=True, metadata={"description": "every match per kind"})
    total = fields.Integer(required=True)


class RecommendationQueryV1(Schema):
    severity = fields.String(metadata={"description": "comma list of info, warning, critical (API012 otherwise)",
                                       "pattern": choice_list_pattern(SEVERITIES)})
    kind = fields.String(metadata={"description": "comma list of resource types: "
                                                  + ", ".join(RESOURCE_TYPES) + " (API012 otherwise)",
                                   "pattern": choice_list_pattern(RESOURCE_TYPES)})
    resource = fields.String(metadata={"description": "resource id or name, exact"})
    check = fields.String(metadata={"description": "comma list of check ids (API012 for an unknown one)",
                                    "pattern": choice_list_pattern((*CHECK_IDS, *PROMETHEUS_CHECK_IDS))})
    limit = LenientInteger("findings per page: default 200, 1..1000 (clamped); invalid ones ignored", 1)
    offset = LenientInteger("findings to skip (default 0; invalid ones ignored)", 0)


class FindingV1(Schema):
    id = fields.String(required=True, metadata={"description": "stable: <check>:<resourceType>:<resourceId>"})
    check = fields.String(required=True)
    category = fields.String(required=True, metadata={"description": "the check id (reference name)"})
    severity = fields.String(required=True, validate=validate.OneOf(SEVERITIES))
    scope = fields.String(required=True, validate=validate.OneOf(SCOPES))
    resourceType = fields.String(required=True, validate=validate.OneOf(RESOURCE_TYPES))
    resourceId = fields.String(required=True)
    resourceName = fields.String(required=True)
    targetId = fields.String(required=True, metadata={"description": "= resourceId (reference name)"})
    targetName = fields.String(required=True, metadata={"description": "= resourceName (reference name)"})
    link = fields.String(allow_none=True, metadata={"description": "path of the resource; null for the cluster"})
    resource = fields.String(validate=validate.OneOf(["cpu", "memory", "cpu+memory"]),
                             metadata={"description": "limit checks: what is missing"})
    message = fields.String(required=True)
    fix = fields.String(required=True, metadata={"description": "suggested fix"})
    fixAction = fields.String(metadata={"description": "write endpoint that applies the fix, when one exists"})
    current = fields.Raw(metadata={"description": "Prometheus checks: measured use (CPU percent of one core, "
                                               "memory bytes; an object by resource for cpu+memory)"})
    configured = fields.Raw(metadata={"description": "Prometheus checks: the limit or reservation, same units"})
    suggested = fields.Raw(metadata={"description": "Prometheus checks: CPU NanoCPUs, memory bytes (use x 2.0)"})
    firstSeen = fields.String(required=True, metadata={
        "description": "RFC 3339: when the finding appeared (kept while it persists)"})
    seq = fields.Integer(required=True, metadata={"description": "appearance order; the feeds' before cursor"})


class SeveritySummaryV1(Schema):
    critical = fields.Integer(required=True)
    warning = fields.Integer(required=True)
    info = fields.Integer(required=True)


class RecommendationCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(FindingV1), required=True)
    total = fields.Integer(required=True, metadata={"description": "findings matching the filters"})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
    summary = fields.Nested(SeveritySummaryV1, required=True, metadata={
        "description": "findings matching the filters, by severity"})
    computedAt = fields.String(required=True, allow_none=True, metadata={
        "description": "RFC 3339 end of the latest evaluation; null before the first"})
