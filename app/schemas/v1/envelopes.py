"""Version-1 envelopes: collection, per-kind detail, references, problems, meta documents.

Used to dump nothing but the envelope's fixed members and, above all, to describe the responses in the
OpenAPI document; ``app.http.respond`` builds the bodies with the per-kind resource schemas.
"""

from __future__ import annotations

from typing import Any

from marshmallow import INCLUDE, Schema, fields, validate

from app.query.service_insights import INTEGRATION_NAMES, MAX_CHANGES, MAX_VALUE_CHARS
from app.resources import ResourceKind
from app.schemas.query_params import LenientInteger
from app.schemas.v1 import resources as r


class JsonLdV1(Schema):
    context = fields.String(data_key="@context", metadata={"example": "/api/context.jsonld"})
    id_ = fields.String(data_key="@id")
    type_ = fields.String(data_key="@type")


class ReferenceV1(Schema):
    id_ = fields.String(data_key="@id")
    id = fields.String()
    name = fields.String(allow_none=True)


class TaskReferenceV1(ReferenceV1):
    state = fields.String()
    desiredState = fields.String()


class NodeReferenceV1(Schema):
    id_ = fields.String(data_key="@id")
    id = fields.String()
    hostname = fields.String(allow_none=True)


class ProblemV1(Schema):
    """RFC 9457 problem; extension members beyond these may appear (the RFC allows them)."""

    class Meta:
        unknown = INCLUDE

    context = fields.String(data_key="@context")
    id_ = fields.String(data_key="@id")
    type_ = fields.String(data_key="@type")
    type = fields.String(metadata={"description": "about:blank or /api/errors/<code>"})
    title = fields.String()
    status = fields.Integer()
    detail = fields.String()
    instance = fields.String()
    requestId = fields.String()
    code = fields.String(metadata={"description": "stable error code, e.g. FLT002"})
    position = fields.Integer(allow_none=True, metadata={
        "description": "filter errors: 0-based offset in the expression; null where it is not known"})
    field = fields.String(metadata={"description": "FLT004: the unknown field"})


class SpecChangeV1(Schema):
    """One difference between a service's PreviousSpec and Spec (``app.query.service_insights``)."""

    field = fields.String(required=True, metadata={
        "description": "path in Spec: struct members joined by dots, map keys (Labels, Env by variable name, "
                       "Sysctls, Options) in brackets as JSON strings",
        "example": 'Labels["traefik.enable"]'})
    old = fields.Raw(metadata={"description": "previous value; absent when the field was added"})
    new = fields.Raw(metadata={"description": "current value; absent when the field was removed"})
    abridged = fields.Boolean(metadata={"description": f"old or new was longer than {MAX_VALUE_CHARS} characters "
                                                       "of JSON and is shown cut, as text ending in …"})


class TraefikDomainV1(Schema):
    main = fields.String()
    sans = fields.List(fields.String())


class TraefikRouterTlsV1(Schema):
    """Traefik's router ``tls`` section; the router has none when TLS is off."""

    certResolver = fields.String()
    options = fields.String(metadata={"description": "name of a TLS options definition"})
    domains = fields.List(fields.Nested(TraefikDomainV1))
    passthrough = fields.Boolean(allow_none=True, metadata={"description": "tcp routers; null when not a boolean"})


class TraefikRouterV1(Schema):
    name = fields.String()
    protocol = fields.String(validate=validate.OneOf(["http", "tcp", "udp"]))
    rule = fields.String()
    entrypoints = fields.List(fields.String())
    middlewares = fields.List(fields.String())
    service = fields.String()
    priority = fields.Integer(allow_none=True, metadata={"description": "null when the label is not an integer"})
    tls = fields.Nested(TraefikRouterTlsV1, metadata={"description": "present only when TLS is on"})


class TraefikServiceV1(Schema):
    name = fields.String()
    protocol = fields.String(validate=validate.OneOf(["http", "tcp", "udp"]))
    port = fields.Integer(allow_none=True, metadata={"description": "loadbalancer.server.port"})
    scheme = fields.String(metadata={"description": "loadbalancer.server.scheme"})


def _flag(description: str) -> fields.Boolean:
    return fields.Boolean(allow_none=True, metadata={"description": description + "; null when not a boolean"})


class IntegrationV1(Schema):
    """A swarm tool configured by the service labels. Members beyond name/enabled/labels depend on the tool
    and appear only when their label does; more may be added, so clients must ignore unknown members."""

    class Meta:
        unknown = INCLUDE

    name = fields.String(required=True, validate=validate.OneOf(INTEGRATION_NAMES))
    enabled = fields.Boolean(required=True, metadata={
        "description": "the tool's enable label, or its default when absent (traefik, shepherd: true; "
                       "swarm-cronjob, diun: false)"})
    labels = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                         metadata={"description": "the tool's raw service labels"})
    routers = fields.List(fields.Nested(TraefikRouterV1), metadata={"description": "traefik"})
    services = fields.List(fields.Nested(TraefikServiceV1), metadata={"description": "traefik"})
    middlewares = fields.List(fields.String(), metadata={"description": "traefik: names defined in the labels"})
    network = fields.String(metadata={"description": "traefik: traefik.swarm.network / traefik.docker.network"})
    authConfig = fields.String(metadata={"description": "shepherd: shepherd.auth.config"})
    schedule = fields.String(metadata={"description": "swarm-cronjob: cron expression"})
    skipRunning = _flag("swarm-cronjob")
    replicas = fields.Integer(allow_none=True, metadata={"description": "swarm-cronjob"})
    registryAuth = _flag("swarm-cronjob")
    queryRegistry = _flag("swarm-cronjob")
    watchRepo = _flag("diun")
    notifyOn = fields.List(fields.String(), metadata={"description": "diun: notify_on split on ;"})
    maxTags = fields.Integer(allow_none=True, metadata={"description": "diun"})
    includeTags = fields.List(fields.String(), metadata={"description": "diun: regular expressions"})
    excludeTags = fields.List(fields.String(), metadata={"description": "diun: regular expressions"})
    sortTags = fields.String(metadata={"description": "diun"})
    regopt = fields.String(metadata={"description": "diun"})
    hubLink = fields.String(metadata={"description": "diun"})
    platform = fields.String(metadata={"description": "diun"})
    metadata = fields.Dict(keys=fields.String(), values=fields.String(),
                           metadata={"description": "diun: diun.metadata.<key> by key"})


RESOURCE_SCHEMAS: dict[ResourceKind, type[Schema]] = {
    ResourceKind.NODE: r.NodeV1, ResourceKind.SERVICE: r.ServiceV1, ResourceKind.TASK: r.TaskV1,
    ResourceKind.STACK: r.StackV1, ResourceKind.CONFIG: r.ConfigV1, ResourceKind.SECRET: r.SecretV1,
    ResourceKind.NETWORK: r.NetworkV1, ResourceKind.VOLUME: r.VolumeV1,
}


def _collection(kind: ResourceKind) -> type[Schema]:
    return JsonLdV1.from_dict({
        "items": fields.List(fields.Nested(RESOURCE_SCHEMAS[kind])),
        "total": fields.Integer(), "limit": fields.Integer(), "offset": fields.Integer(),
    }, name=f"{kind.spec.jsonld_type}CollectionV1")


def _service_insights() -> dict[str, fields.Field[Any]]:
    return {
        "changes": fields.List(fields.Nested(SpecChangeV1), metadata={
            "description": f"PreviousSpec → Spec, sorted by field, at most {MAX_CHANGES}; absent when there is "
                           "no previous spec or no difference"}),
        "changesOmitted": fields.Integer(metadata={
            "description": "differences left out of changes by its bound; absent when none were"}),
        "integrations": fields.List(fields.Nested(IntegrationV1), metadata={
            "description": "swarm tools configured by the service labels, sorted by name; absent when none"}),
    }


def _detail(kind: ResourceKind) -> type[Schema]:
    members: dict[str, fields.Field[Any]] = {kind.spec.detail_key: fields.Nested(RESOURCE_SCHEMAS[kind])}
    if kind in (ResourceKind.NODE, ResourceKind.SERVICE):
        members["tasks"] = fields.List(fields.Nested(TaskReferenceV1))
        if kind is ResourceKind.SERVICE:
            members.update(_service_insights())
    elif kind is ResourceKind.TASK:
        members["service"] = fields.Nested(ReferenceV1)
        members["node"] = fields.Nested(NodeReferenceV1, allow_none=True)
    elif kind is ResourceKind.STACK:
        members["stack"] = fields.Nested(r.StackMembersV1)
    else:
        members["services"] = fields.List(fields.Nested(ReferenceV1))
    return JsonLdV1.from_dict(members, name=f"{kind.spec.jsonld_type}DetailV1")


COLLECTION_SCHEMAS = {kind: _collection(kind) for kind in ResourceKind}
DETAIL_SCHEMAS = {kind: _detail(kind) for kind in ResourceKind}


class ListArgsV1(Schema):
    """Documented list parameters; parsing is lenient by design (see ``app.query.paging``)."""

    limit = LenientInteger("items per page, 1..200 (larger values are clamped, invalid ones ignored)", 1)
    offset = LenientInteger("starting position (invalid values are ignored)", 0)
    sort = fields.String(metadata={"description": "sort field of the kind; unknown fields keep the order"})
    dir = fields.String(metadata={"description": "asc or desc; anything else is asc"})
    search = fields.String(metadata={"description": "case-insensitive substring of the name"})
    filter = fields.String(metadata={"description": "CEL boolean expression over the kind's fields (FLT codes on "
                                                     "errors; FLT006 when it needs more than 200 ms of work in "
                                                     "one request, or a matches() pattern is over RE2's "
                                                     "512 KiB program budget)", "maxLength": 512})


class ErrorDefV1(Schema):
    context = fields.String(data_key="@context")
    id_ = fields.String(data_key="@id")
    type_ = fields.String(data_key="@type")
    code = fields.String()
    title = fields.String()
    status = fields.Integer()
    description = fields.String()
    suggestion = fields.String()


class ErrorCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(ErrorDefV1))
    total = fields.Integer()
    limit = fields.Integer()
    offset = fields.Integer()
