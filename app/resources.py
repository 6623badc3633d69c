"""The eight resource kinds and what the API defines for each: path, JSON-LD type, the fields a
filter expression may use and the fields a list may be sorted by.

Everything that varies per kind is a row here, so the cache, the query pipeline, the blueprints and the
OpenAPI document read one table instead of branching on strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class FieldType(Enum):
    """Type of a filter field; every activation value is always present (``""`` or ``0`` when unset)."""

    STRING = "string"
    INT = "int"


class ResourceKind(Enum):
    NODE = "node"
    SERVICE = "service"
    TASK = "task"
    STACK = "stack"
    CONFIG = "config"
    SECRET = "secret"
    NETWORK = "network"
    VOLUME = "volume"

    @property
    def spec(self) -> KindSpec:
        return KIND_SPECS[self]

    @classmethod
    def from_plural(cls, plural: str) -> ResourceKind | None:
        return _BY_PLURAL.get(plural)


@dataclass(frozen=True, slots=True)
class KindSpec:
    plural: str                       # URL segment: /services
    jsonld_type: str                  # "@type" of one resource
    id_is_name: bool                  # stacks and volumes are addressed by name
    filter_fields: dict[str, FieldType]
    sort_fields: tuple[str, ...]
    detail_key: str                   # key of the resource inside its detail envelope

    @property
    def path(self) -> str:
        return f"/{self.plural}"

    @property
    def id_placeholder(self) -> str:
        return "name" if self.id_is_name else "id"


_S, _I = FieldType.STRING, FieldType.INT

KIND_SPECS: dict[ResourceKind, KindSpec] = {
    ResourceKind.NODE: KindSpec(
        "nodes", "Node", False,
        {"id": _S, "name": _S, "state": _S, "role": _S, "availability": _S},
        ("hostname", "role", "status", "availability"), "node"),
    ResourceKind.SERVICE: KindSpec(
        "services", "Service", False,
        {"id": _S, "name": _S, "image": _S, "mode": _S, "stack": _S},
        ("name", "mode"), "service"),
    ResourceKind.TASK: KindSpec(
        "tasks", "Task", False,
        {"id": _S, "state": _S, "desired_state": _S, "image": _S, "exit_code": _I, "error": _S,
         "service": _S, "node": _S, "slot": _I},
        ("state", "service", "node"), "task"),
    ResourceKind.STACK: KindSpec(
        "stacks", "Stack", True,
        {"name": _S, "services": _I, "configs": _I, "secrets": _I, "networks": _I, "volumes": _I},
        ("name",), "stack"),
    ResourceKind.CONFIG: KindSpec(
        "configs", "Config", False, {"id": _S, "name": _S},
        ("name", "created", "updated"), "config"),
    ResourceKind.SECRET: KindSpec(
        "secrets", "Secret", False, {"id": _S, "name": _S},
        ("name", "created", "updated"), "secret"),
    ResourceKind.NETWORK: KindSpec(
        "networks", "Network", False,
        {"id": _S, "name": _S, "driver": _S, "scope": _S},
        ("name", "driver", "scope"), "network"),
    ResourceKind.VOLUME: KindSpec(
        "volumes", "Volume", True,
        {"name": _S, "driver": _S, "scope": _S},
        ("name", "driver", "scope"), "volume"),
}

_BY_PLURAL = {spec.plural: kind for kind, spec in KIND_SPECS.items()}

# Kinds the watcher lists from the engine; stacks are derived from labels inside the cache.
ENGINE_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind.NODE, ResourceKind.SERVICE, ResourceKind.TASK, ResourceKind.CONFIG,
    ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME,
)

STACK_LABEL = "com.docker.stack.namespace"
