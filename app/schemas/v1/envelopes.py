"""Version-1 envelopes: collection, per-kind detail, references, problems, meta documents.

Used to dump nothing but the envelope's fixed members and, above all, to describe the responses in the
OpenAPI document; ``app.http.respond`` builds the bodies with the per-kind resource schemas.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields

from app.resources import ResourceKind
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
    position = fields.Integer(metadata={"description": "filter errors: 0-based offset in the expression"})


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


def _detail(kind: ResourceKind) -> type[Schema]:
    members: dict[str, fields.Field[Any]] = {kind.spec.detail_key: fields.Nested(RESOURCE_SCHEMAS[kind])}
    if kind in (ResourceKind.NODE, ResourceKind.SERVICE):
        members["tasks"] = fields.List(fields.Nested(TaskReferenceV1))
    elif kind is ResourceKind.TASK:
        members["service"] = fields.Nested(ReferenceV1)
        members["node"] = fields.Nested(NodeReferenceV1, allow_none=True)
    elif kind is ResourceKind.STACK:
        members["stack"] = fields.Nested(r.StackDetailV1)
    else:
        members["services"] = fields.List(fields.Nested(ReferenceV1))
    return JsonLdV1.from_dict(members, name=f"{kind.spec.jsonld_type}DetailV1")


COLLECTION_SCHEMAS = {kind: _collection(kind) for kind in ResourceKind}
DETAIL_SCHEMAS = {kind: _detail(kind) for kind in ResourceKind}


class ListArgsV1(Schema):
    """Documented list parameters; parsing is lenient by design (see ``app.query.paging``)."""

    limit = fields.Integer(metadata={"description": "items per page, 1..200 (larger values are clamped, "
                                                    "invalid ones ignored)", "example": 50})
    offset = fields.Integer(metadata={"description": "starting position (invalid values are ignored)"})
    sort = fields.String(metadata={"description": "sort field of the kind; unknown fields keep the order"})
    dir = fields.String(metadata={"description": "asc or desc; anything else is asc"})
    search = fields.String(metadata={"description": "case-insensitive substring of the name"})
    filter = fields.String(metadata={"description": "CEL boolean expression over the kind's fields (FLT codes on "
                                                     "errors)", "maxLength": 512})


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
