"""A format-neutral graph: nodes keyed by URN, pairwise edges and hyperedges, each with a metadata dict.

The builders (``logical``, ``physical``) fill it from the cache; the renderers (``jgf``, ``graphml``,
``dot``) only read it. Metadata values are JSON values (str, int, bool, None, lists, dicts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

URN_PREFIX = "urn:service:"
Metadata = dict[str, Any]


def urn(kind: str, object_id: str) -> str:
    """``urn:service:<kind>:<id>``: the key of a graph node, the id of a task or network in metadata."""
    return f"{URN_PREFIX}{kind}:{object_id}"


@dataclass(frozen=True, slots=True)
class GraphNode:
    key: str
    label: str
    metadata: Metadata


@dataclass(frozen=True, slots=True)
class GraphEdge:
    source: str
    target: str
    metadata: Metadata


@dataclass(frozen=True, slots=True)
class HyperEdge:
    nodes: list[str]
    metadata: Metadata


@dataclass(slots=True)
class Graph:
    id: str
    type: str
    label: str
    directed: bool = False
    metadata: Metadata = field(default_factory=dict)
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    hyperedges: list[HyperEdge] = field(default_factory=list)
