"""Version-1 schemas of ``/topology`` (JGF, docs/topology.md) and the legacy flat views. They describe the
bodies in the OpenAPI document; ``app.topology`` builds them."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, fields

from app.schemas.v1.envelopes import JsonLdV1

_META = {"description": "JSON-LD annotated metadata; always has @context"}


class GraphMetadataV1(Schema):
    class Meta:
        unknown = INCLUDE

    context = fields.String(data_key="@context", required=True)


class JgfNodeV1(Schema):
    label = fields.String(required=True)
    metadata = fields.Nested(GraphMetadataV1, required=True, metadata=_META)


class JgfEdgeV1(Schema):
    source = fields.String(required=True)
    target = fields.String(required=True)
    metadata = fields.Nested(GraphMetadataV1, required=True, metadata={
        "description": "networks: [{id (URN), name, driver, scope, aliases?}]"})


class JgfHyperedgeV1(Schema):
    nodes = fields.List(fields.String(), required=True)
    metadata = fields.Nested(GraphMetadataV1, required=True, metadata={
        "description": "kind stack {name} or placement {tasks: [{id, node, state, slot, image}]}"})


class JgfGraphV1(Schema):
    id = fields.String(required=True, metadata={"description": "network or placement"})
    type = fields.String(required=True, metadata={"description": "network-topology or placement-topology"})
    label = fields.String(required=True)
    directed = fields.Boolean(required=True)
    metadata = fields.Nested(GraphMetadataV1, required=True, metadata=_META)
    nodes = fields.Dict(keys=fields.String(), values=fields.Nested(JgfNodeV1), required=True, metadata={
        "description": "keyed by URN urn:service:<kind>:<id>"})
    edges = fields.List(fields.Nested(JgfEdgeV1))
    hyperedges = fields.List(fields.Nested(JgfHyperedgeV1))


class TopologyV1(JsonLdV1):
    graphs = fields.List(fields.Nested(JgfGraphV1), required=True, metadata={
        "description": "[logical (network), physical (placement)]"})


class LegacyServiceV1(Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    stack = fields.String(allow_none=True)
    replicas = fields.Integer()
    image = fields.String()
    mode = fields.String()
    ports = fields.List(fields.String())
    updateStatus = fields.String(allow_none=True)


class LegacyEdgeV1(Schema):
    source = fields.String(required=True)
    target = fields.String(required=True)
    networks = fields.List(fields.String(), required=True)


class LegacyNetworkV1(Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    driver = fields.String()
    scope = fields.String()
    services = fields.List(fields.String(), required=True)


class NetworkTopologyV1(JsonLdV1):
    nodes = fields.List(fields.Nested(LegacyServiceV1), required=True)
    edges = fields.List(fields.Nested(LegacyEdgeV1), required=True)
    networks = fields.List(fields.Nested(LegacyNetworkV1), required=True)


class LegacyTaskV1(Schema):
    id = fields.String(required=True)
    serviceId = fields.String(required=True)
    serviceName = fields.String(allow_none=True)
    state = fields.String()
    slot = fields.Integer(allow_none=True)
    image = fields.String()


class LegacyNodeV1(Schema):
    id = fields.String(required=True)
    hostname = fields.String(required=True)
    role = fields.String()
    state = fields.String()
    availability = fields.String()
    tasks = fields.List(fields.Nested(LegacyTaskV1), required=True)


class PlacementTopologyV1(JsonLdV1):
    nodes = fields.List(fields.Nested(LegacyNodeV1), required=True)
