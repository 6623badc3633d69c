"""JSON Graph Format (https://jsongraphformat.info/, v2: ``nodes`` is an object keyed by node id) of the
topology graphs: ``{"graphs": [...]}`` with the JSON-LD members added by the caller."""

from __future__ import annotations

from typing import Any

from app.topology.model import Graph


def graph(value: Graph) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": value.id, "type": value.type, "label": value.label, "directed": value.directed,
        "metadata": value.metadata,
        "nodes": {node.key: {"label": node.label, "metadata": node.metadata} for node in value.nodes},
    }
    if value.edges:
        body["edges"] = [{"source": edge.source, "target": edge.target, "metadata": edge.metadata}
                         for edge in value.edges]
    if value.hyperedges:
        body["hyperedges"] = [{"nodes": hyper.nodes, "metadata": hyper.metadata} for hyper in value.hyperedges]
    return body


def document(graphs: list[Graph]) -> dict[str, Any]:
    return {"graphs": [graph(value) for value in graphs]}
