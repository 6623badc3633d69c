"""Version-1 schemas of ``/swarm`` and ``/plugins`` (docs/swarm-and-plugins.md). They describe the answers
in the OpenAPI document; the engine objects inside are passed through in the engine's own JSON."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, fields

from app.schemas.v1.envelopes import JsonLdV1


class EngineObjectV1(Schema):
    """An engine object passed through (PascalCase members, as the engine sends them)."""

    class Meta:
        unknown = INCLUDE


class SwarmObjectV1(EngineObjectV1):
    ID = fields.String()
    Version = fields.Dict()
    CreatedAt = fields.String()
    UpdatedAt = fields.String()
    Spec = fields.Dict()
    JoinTokens = fields.Dict(metadata={"description": "Worker and Manager are empty strings unless the caller "
                                                      "may rotate them (operations level 3 and ACL "
                                                      "write on swarm:cluster)"})
    RootRotationInProgress = fields.Boolean()


class SwarmV1(JsonLdV1):
    swarm = fields.Nested(SwarmObjectV1, required=True)
    managerAddr = fields.String(allow_none=True, metadata={
        "description": "address (host:port) of the swarm's leader, else of a reachable manager; null when "
                       "the cache knows none", "example": "192.168.79.113:2377"})


def section_schema(key: str, name: str) -> type[Schema]:
    """The answer of one swarm settings PATCH: ``{@context, @id, @type, <key>: {...}}``."""
    return JsonLdV1.from_dict({key: fields.Dict(required=True, metadata={
        "description": "that part of Swarm.Spec, read back from the engine after the write"})}, name=name)


class UnlockKeyV1(JsonLdV1):
    unlockKey = fields.String(required=True, metadata={"example": "SWMKEY-1-..."})


class PluginObjectV1(EngineObjectV1):
    Id = fields.String()
    Name = fields.String()
    Enabled = fields.Boolean()
    Settings = fields.Dict()
    PluginReference = fields.String()
    Config = fields.Dict()


class PluginItemV1(PluginObjectV1):
    id_ = fields.String(data_key="@id", metadata={"description": "/plugins/<Name>, or /plugins/<Id> when the "
                                                                 "name has a slash"})
    type_ = fields.String(data_key="@type")


class PluginCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(PluginItemV1), required=True)
    total = fields.Integer(required=True)
    limit = fields.Integer(required=True, metadata={"description": "unpaginated: equals total"})
    offset = fields.Integer(required=True)


class PluginV1(JsonLdV1):
    plugin = fields.Nested(PluginObjectV1, required=True)


class PrivilegeV1(Schema):
    Name = fields.String()
    Description = fields.String()
    Value = fields.List(fields.String())


class PrivilegesV1(JsonLdV1):
    privileges = fields.List(fields.Nested(PrivilegeV1), required=True)
