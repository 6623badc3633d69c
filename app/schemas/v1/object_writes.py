"""Version-1 schemas of the object write answers and their paired reads: the labels sub-resource of
nodes, configs and secrets, a node's role, and the outcome of a stack removal. They describe the bodies
in the OpenAPI document; the views build them (``app.blueprints.node_writes``, ``object_writes``)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.schemas.v1.envelopes import JsonLdV1


class LabelsV1(JsonLdV1):
    labels = fields.Dict(keys=fields.String(), values=fields.String(), required=True, metadata={
        "description": "Spec.Labels of the object ({} when it has none)"})


class NodeRoleV1(JsonLdV1):
    role = fields.String(required=True, validate=validate.OneOf(["worker", "manager"]),
                         metadata={"description": "Spec.Role: the role a PUT sets"})
    isLeader = fields.Boolean(required=True, metadata={"description": "the node leads the raft group now"})
    managerCount = fields.Integer(required=True, metadata={
        "description": "nodes of the cluster whose Spec.Role is manager"})


class StackRemovedCountsV1(Schema):
    services = fields.Integer(required=True)
    networks = fields.Integer(required=True)
    configs = fields.Integer(required=True)
    secrets = fields.Integer(required=True)


class StackRemovalErrorV1(Schema):
    type = fields.String(required=True, validate=validate.OneOf(["service", "network", "config", "secret"]))
    id = fields.String(required=True)
    error = fields.String(required=True, metadata={"description": "the engine's refusal"})


class StackRemovalV1(JsonLdV1):
    removed = fields.Nested(StackRemovedCountsV1, required=True, metadata={
        "description": "members removed per kind (volumes are kept; members already gone are skipped)"})
    errors = fields.List(fields.Nested(StackRemovalErrorV1), metadata={
        "description": "members the engine refused to remove; absent when none"})
