"""Version-1 schemas of the log page, for the OpenAPI document (bodies are built by ``app.logs.page``)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.logs.lines import STREAMS


class LogLineV1(Schema):
    timestamp = fields.String(metadata={"description": "RFC 3339 with nanoseconds, UTC",
                                        "example": "2026-04-13T08:12:34.123456789Z"})
    message = fields.String()
    stream = fields.String(validate=validate.OneOf(STREAMS))
    attrs = fields.Dict(keys=fields.String(), metadata={
        "description": "nodeId, serviceId, taskId (engine details, shortened), serviceName and slot "
                       "(from the cache), and any log-opt attributes"})
    json = fields.Dict(metadata={"description": "the message decoded, when it is a JSON object"})


class LogResponseV1(Schema):
    context = fields.String(data_key="@context")
    id_ = fields.String(data_key="@id")
    type_ = fields.String(data_key="@type", metadata={"example": "LogResponse"})
    lines = fields.List(fields.Nested(LogLineV1), metadata={"description": "oldest first; the newest limit"})
    oldest = fields.String(allow_none=True)
    newest = fields.String(allow_none=True)
    hasMore = fields.Boolean(metadata={"description": "older matching lines exist (cut by limit) or may exist "
                                                      "(the engine sent as many lines as it was asked for)"})
    cursor = fields.String(allow_none=True, metadata={
        "description": "newest line's timestamp + 1 ns; pass it as since to get only newer lines. With no "
                       "line: the start the request gave (since as given, after + 1 ns), else null"})


class LogArgsV1(Schema):
    limit = fields.Integer(metadata={"description": "JSON: lines kept, default 500, max 10000 (clamped); "
                                                    "≤0 or not an integer → 500"})
    after = fields.String(metadata={"description": "RFC 3339 (nano) timestamp or duration (1h30m, before now); "
                                                   "lines at or before it are dropped (LOG003)"})
    since = fields.String(metadata={"description": "as after, but inclusive: lines older than it are dropped "
                                                   "(the cursor's parameter)"})
    before = fields.String(metadata={"description": "JSON only: lines at or after it are dropped (LOG004; on a "
                                                    "live stream LOG005)"})
    stream = fields.String(validate=validate.OneOf(STREAMS), metadata={"description": "stdout or stderr (LOG002)"})
