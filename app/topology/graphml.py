"""GraphML (http://graphml.graphdrawing.org/) of the topology graphs, both in one document.

GraphML wants node ids unique in the whole document, and a service is a node of both graphs: ids are
``<graph id>:<URN>`` and the URN is also a ``urn`` data value. Metadata members become ``data`` values
(lists and objects as JSON text; ``@context``/``@type`` are left out: not valid attribute names, and
meaningless outside JSON-LD); one ``key`` per member name, typed boolean/long when every value is.
Hyperedges (stacks, placements) are GraphML ``hyperedge`` elements. ElementTree escapes markup; characters
XML 1.0 cannot carry at all (control characters) are dropped.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

from app.topology.model import Graph, Metadata

NAMESPACE = "http://graphml.graphdrawing.org/xmlns"
MEDIA_TYPE = "application/graphml+xml"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SKIPPED = ("@context", "@type")


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _NOT_XML.sub("", text)


def _type_of(values: list[Any]) -> str:
    if values and all(isinstance(v, bool) for v in values):
        return "boolean"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "long"
    return "string"


def _metadata_of(graphs: list[Graph]) -> Iterable[Metadata]:
    for graph in graphs:
        yield graph.metadata
        yield from (node.metadata for node in graph.nodes)
        yield from (edge.metadata for edge in graph.edges)
        yield from (hyper.metadata for hyper in graph.hyperedges)


def _keys(graphs: list[Graph]) -> dict[str, str]:
    """Member name → GraphML type, over every metadata object (``label``/``urn``/``type`` first)."""
    values: dict[str, list[Any]] = {"label": [""], "urn": [""], "type": [""]}
    for metadata in _metadata_of(graphs):
        for name, value in metadata.items():
            if name not in _SKIPPED and value is not None:
                values.setdefault(name, []).append(value)
    return {name: _type_of(found) for name, found in values.items()}


def _data(parent: ET.Element, name: str, value: Any) -> None:
    if value is None or name in _SKIPPED:
        return
    element = ET.SubElement(parent, "data", key="d_" + name)
    element.text = str(value).lower() if isinstance(value, bool) else _text(value)


def _graph(root: ET.Element, graph: Graph) -> None:
    element = ET.SubElement(root, "graph", id=graph.id, edgedefault="directed" if graph.directed else "undirected")
    _data(element, "label", graph.label)
    _data(element, "type", graph.type)
    for name, value in graph.metadata.items():
        _data(element, name, value)

    def node_id(key: str) -> str:
        return _text(f"{graph.id}:{key}")

    for node in graph.nodes:
        child = ET.SubElement(element, "node", id=node_id(node.key))
        _data(child, "urn", node.key)
        _data(child, "label", node.label)
        for name, value in node.metadata.items():
            _data(child, name, value)
    for edge in graph.edges:
        child = ET.SubElement(element, "edge", source=node_id(edge.source), target=node_id(edge.target))
        for name, value in edge.metadata.items():
            _data(child, name, value)
    for hyper in graph.hyperedges:
        child = ET.SubElement(element, "hyperedge")
        for name, value in hyper.metadata.items():
            _data(child, name, value)
        for key in hyper.nodes:
            ET.SubElement(child, "endpoint", node=node_id(key))


def render(graphs: list[Graph]) -> bytes:
    root = ET.Element("graphml", xmlns=NAMESPACE)
    for name, kind in _keys(graphs).items():
        ET.SubElement(root, "key", {"id": "d_" + name, "for": "all", "attr.name": name, "attr.type": kind})
    for graph in graphs:
        _graph(root, graph)
    body: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return body
