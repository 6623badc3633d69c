"""Version-1 schemas of the change history (docs/history-and-feeds.md, with the diff and audit slot) and of
JSON Feed 1.1 pages. They describe the bodies in the OpenAPI document; ``app.history.entries`` and
``app.http.feeds`` build them."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.cache.history import Action
from app.history.selection import ACTION_DESCRIPTION, ACTION_PATTERN
from app.resources import ResourceKind
from app.schemas.query_params import NOT_BLANK, LenientInteger
from app.schemas.v1.envelopes import JsonLdV1, SpecChangeV1


class AuditV1(Schema):
    identity = fields.String(metadata={"description": "who made the change through this service"})
    requestId = fields.String(metadata={"description": "Request-Id of the write"})
    via = fields.String(metadata={"description": "mcp: made by an agent tool (docs/agent-tools.md)"})
    tool = fields.String(metadata={"description": "the agent tool that made it"})
    client = fields.String(metadata={"description": "the agent's OAuth client id (with a bearer token)"})


class HistoryEntryV1(JsonLdV1):
    id = fields.Integer(required=True, metadata={"description": "sequence number; the before cursor"})
    timestamp = fields.String(required=True, metadata={"description": "RFC 3339, when the change was recorded"})
    type = fields.String(required=True, validate=validate.OneOf([k.value for k in ResourceKind]))
    action = fields.String(required=True, validate=validate.OneOf([a.value for a in Action]))
    resourceId = fields.String(required=True, metadata={"description": "engine id; stacks and volumes: name"})
    name = fields.String(required=True, metadata={"description": "display name (tasks: <service>.<slot>)"})
    resource = fields.String(required=True, metadata={"description": "path of the resource"})
    summary = fields.String(required=True, metadata={"example": "replicas 2→3, image a→b"})
    changes = fields.List(fields.Nested(SpecChangeV1), metadata={
        "description": "updates only: field-level differences, paths from the object root (Spec.…, Status.State)"})
    changesOmitted = fields.Integer(metadata={"description": "differences beyond the first 100"})
    audit = fields.Nested(AuditV1, allow_none=True, metadata={
        "description": "who made the change through this service's write endpoints; null for changes "
                       "observed on the engine (all of them until writes exist)"})


class HistoryCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(HistoryEntryV1))
    total = fields.Integer(metadata={"description": "entries on this page"})
    limit = fields.Integer()
    offset = fields.Integer(metadata={"description": "always 0: history pages by cursor (before)"})
    next = fields.String(metadata={"description": "the older page; absent when no older entry matches"})


class HistoryQueryV1(Schema):
    type = fields.String(validate=validate.OneOf([k.value for k in ResourceKind]),
                         metadata={"description": "only this kind (API012 otherwise)"})
    resourceId = fields.String(metadata={"description": "only this object (stacks, volumes: name); not blank "
                                                        "(API012)", "pattern": NOT_BLANK})
    action = fields.String(validate=validate.Regexp(ACTION_PATTERN),
                           metadata={"description": ACTION_DESCRIPTION, "pattern": ACTION_PATTERN})
    before = fields.Integer(metadata={"description": "cursor: entries with a smaller id (API012 if not a "
                                                     "positive integer)", "minimum": 1})
    limit = LenientInteger("1..200, default 50; larger values are clamped, invalid ones ignored", 1)


class JsonFeedAuthorV1(Schema):
    name = fields.String()


class JsonFeedItemV1(Schema):
    id = fields.String(required=True)
    url = fields.String()
    external_url = fields.String()
    title = fields.String()
    summary = fields.String()
    content_text = fields.String()
    date_published = fields.String()
    date_modified = fields.String()
    tags = fields.List(fields.String())
    authors = fields.List(fields.Nested(JsonFeedAuthorV1))
    shoal = fields.Dict(data_key="_shoal", metadata={"description": "the item's JSON form (a HistoryEntry)"})


class JsonFeedV1(Schema):
    """JSON Feed 1.1 (https://jsonfeed.org/version/1.1)."""

    version = fields.String(required=True, metadata={"example": "https://jsonfeed.org/version/1.1"})
    title = fields.String(required=True)
    home_page_url = fields.String()
    feed_url = fields.String()
    next_url = fields.String()
    description = fields.String()
    authors = fields.List(fields.Nested(JsonFeedAuthorV1))
    shoal = fields.Dict(data_key="_shoal", metadata={"description": "feedId, first page, updated"})
    items = fields.List(fields.Nested(JsonFeedItemV1), required=True)
