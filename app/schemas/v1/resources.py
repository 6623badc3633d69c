"""Dump schemas of ``application/vnd.service.v1+json``: the resource representations of version 1.

Engine objects pass through in the engine's own PascalCase, but a version fixes which top-level members
appear, so an engine upgrade cannot silently change the v1 contract. Nested values are passed as-is.
Secret payloads were already removed when the object entered the cache; ``SecretV1`` has no ``Data``
either way.
"""

from __future__ import annotations

from marshmallow import Schema, fields


def _raw(description: str = "") -> fields.Raw:
    return fields.Raw(metadata={"description": description} if description else {})


class _LinkedV1(Schema):
    id_ = fields.String(data_key="@id", attribute="@id", metadata={"description": "resource path"})
    type_ = fields.String(data_key="@type", attribute="@type")


class _SwarmObjectV1(_LinkedV1):
    ID = fields.String()
    Version = _raw("engine object version; Index increases on every change")
    CreatedAt = fields.String()
    UpdatedAt = fields.String()
    Spec = _raw()


class NodeV1(_SwarmObjectV1):
    Description = _raw()
    Status = _raw()
    ManagerStatus = _raw()


class ServiceV1(_SwarmObjectV1):
    PreviousSpec = _raw()
    Endpoint = _raw()
    UpdateStatus = _raw()
    ServiceStatus = _raw()
    JobStatus = _raw()
    RunningTasks = fields.Integer(metadata={"description": "tasks of this service in state running"})


class TaskV1(_SwarmObjectV1):
    Labels = _raw()
    ServiceID = fields.String()
    Slot = fields.Integer()
    NodeID = fields.String()
    Status = _raw()
    DesiredState = fields.String()
    NetworksAttachments = _raw()
    GenericResources = _raw()
    AssignedGenericResources = _raw()
    Volumes = _raw()
    JobIteration = _raw()
    ServiceName = fields.String()
    NodeHostname = fields.String()


class ConfigV1(_SwarmObjectV1):
    pass


class SecretV1(_SwarmObjectV1):
    """Spec never contains Data: payloads are redacted before caching."""


class NetworkV1(_LinkedV1):
    Name = fields.String()
    Id = fields.String()
    Created = fields.String()
    Scope = fields.String()
    Driver = fields.String()
    EnableIPv6 = fields.Boolean()
    IPAM = _raw()
    Internal = fields.Boolean()
    Attachable = fields.Boolean()
    Ingress = fields.Boolean()
    ConfigFrom = _raw()
    ConfigOnly = fields.Boolean()
    Containers = _raw()
    Options = _raw()
    Labels = _raw()
    Peers = _raw()
    Services = _raw()


class VolumeV1(_LinkedV1):
    Name = fields.String()
    Driver = fields.String()
    Mountpoint = fields.String()
    CreatedAt = fields.String()
    Labels = _raw()
    Scope = fields.String()
    Options = _raw()
    Status = _raw()
    UsageData = _raw()
    ClusterVolume = _raw()


class StackV1(_LinkedV1):
    name = fields.String()
    services = fields.List(fields.String(), metadata={"description": "member service ids"})
    configs = fields.List(fields.String())
    secrets = fields.List(fields.String())
    networks = fields.List(fields.String())
    volumes = fields.List(fields.String(), metadata={"description": "member volume names"})


class StackMembersV1(_LinkedV1):
    """A stack in its detail envelope: the member objects in full, each in its engine JSON."""

    name = fields.String()
    services = fields.List(fields.Raw())
    configs = fields.List(fields.Raw())
    secrets = fields.List(fields.Raw())
    networks = fields.List(fields.Raw())
    volumes = fields.List(fields.Raw())
