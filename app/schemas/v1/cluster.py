"""Version-1 schemas of the cluster-wide reads: ``/cluster``, ``/cluster/capacity``,
``/disk-usage`` and ``/stacks/summary``. They describe the bodies in the OpenAPI document; ``app.cluster``
and ``app.engine.system`` build them."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.engine.system import DISK_TYPES
from app.schemas.v1.envelopes import JsonLdV1

_STATES = {"description": "task state → number of cached tasks in it (history included)"}


class ClusterV1(JsonLdV1):
    nodeCount = fields.Integer(required=True)
    serviceCount = fields.Integer(required=True)
    taskCount = fields.Integer(required=True)
    stackCount = fields.Integer(required=True)
    tasksByState = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True, metadata=_STATES)
    nodesReady = fields.Integer(required=True)
    nodesDown = fields.Integer(required=True)
    nodesDraining = fields.Integer(required=True, metadata={"description": "availability drain"})
    servicesConverged = fields.Integer(required=True, metadata={
        "description": "global services and jobs, and replicated services with running ≥ desired"})
    servicesDegraded = fields.Integer(required=True)
    reservedCPU = fields.Integer(required=True, metadata={
        "description": "NanoCPUs: per-task reservation times desired tasks, summed over services"})
    reservedMemory = fields.Integer(required=True, metadata={"description": "bytes, as reservedCPU"})
    totalCPU = fields.Integer(required=True, metadata={"description": "whole cores over all nodes"})
    totalMemory = fields.Integer(required=True, metadata={"description": "bytes over all nodes"})
    prometheusConfigured = fields.Boolean(required=True)
    localNodeID = fields.String(metadata={
        "description": "the engine's own node (info Swarm.NodeID); absent until known"})


class ResourceAmountV1(Schema):
    total = fields.Float(required=True)
    reserved = fields.Float(required=True)
    available = fields.Float(required=True, metadata={"description": "total - reserved, never below 0"})


class NodeCapacityV1(Schema):
    id = fields.String(required=True)
    hostname = fields.String(required=True)
    state = fields.String(required=True)
    availability = fields.String(required=True)
    cpu = fields.Nested(ResourceAmountV1, required=True, metadata={"description": "cores"})
    memory = fields.Nested(ResourceAmountV1, required=True, metadata={"description": "bytes"})


class CapacityTotalsV1(Schema):
    cpu = fields.Float(required=True, metadata={"description": "cores"})
    memory = fields.Integer(required=True, metadata={"description": "bytes"})


class CapacityV1(JsonLdV1):
    maxNodeCPU = fields.Integer(required=True, metadata={"description": "cores of the largest node"})
    maxNodeMemory = fields.Integer(required=True, metadata={"description": "bytes of the largest node"})
    totalCPU = fields.Integer(required=True, metadata={"description": "whole cores"})
    totalMemory = fields.Integer(required=True)
    nodeCount = fields.Integer(required=True)
    reserved = fields.Nested(CapacityTotalsV1, required=True, metadata={
        "description": "reservations of the tasks holding nodes (desired running, assigned..running)"})
    available = fields.Nested(CapacityTotalsV1, required=True, metadata={
        "description": "sum over nodes of total - reserved (never below 0 per node)"})
    nodes = fields.List(fields.Nested(NodeCapacityV1), required=True, metadata={"description": "by hostname"})


class DiskUsageV1(Schema):
    type = fields.String(required=True, validate=validate.OneOf(DISK_TYPES))
    count = fields.Integer(required=True)
    active = fields.Integer(required=True)
    totalSize = fields.Integer(required=True, metadata={"description": "bytes"})
    reclaimable = fields.Integer(required=True, metadata={"description": "bytes"})


class DiskUsageCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(DiskUsageV1), required=True)
    total = fields.Integer(required=True)
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class StackSummaryV1(Schema):
    name = fields.String(required=True)
    serviceCount = fields.Integer(required=True)
    configCount = fields.Integer(required=True)
    secretCount = fields.Integer(required=True)
    networkCount = fields.Integer(required=True)
    volumeCount = fields.Integer(required=True)
    desiredTasks = fields.Integer(required=True, metadata={
        "description": "replicas of replicated services + tasks desired running of the others"})
    tasksByState = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True, metadata=_STATES)
    updatingServices = fields.Integer(required=True, metadata={
        "description": "services whose UpdateStatus is updating or rollback_started"})
    memoryLimitBytes = fields.Integer(required=True, metadata={"description": "limit times desired tasks, summed"})
    cpuLimitCores = fields.Float(required=True, metadata={"description": "limit times desired tasks, summed"})
    memoryUsageBytes = fields.Integer(required=True, allow_none=True, metadata={
        "description": "from Prometheus; null (not wired)"})
    cpuUsagePercent = fields.Float(required=True, allow_none=True, metadata={
        "description": "from Prometheus; null (not wired)"})


class StackSummaryCollectionV1(JsonLdV1):
    items = fields.List(fields.Nested(StackSummaryV1), required=True)
    total = fields.Integer(required=True)
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
