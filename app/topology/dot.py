"""Graphviz DOT of the logical graph: services as boxes, one cluster subgraph per stack, one edge per
service pair labelled with the overlay networks they share.

Every identifier is a double-quoted string, so keywords and odd characters need no special case: in a
quoted DOT string only ``\\"`` is an escape and ``\\\\`` keeps a backslash (a name ending in a backslash
would otherwise escape the closing quote); newlines become ``\\n``, other control characters are dropped.
"""

from __future__ import annotations

import re

from app.topology.model import Graph

MEDIA_TYPE = "text/vnd.graphviz"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def quote(text: str) -> str:
    text = _CONTROL.sub("", text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


def render(graph: Graph) -> bytes:
    connector = "->" if graph.directed else "--"
    lines = [f"{'digraph' if graph.directed else 'graph'} {quote(graph.id)} {{",
             f"  label={quote(graph.label)};", "  node [shape=box];"]
    grouped: set[str] = set()
    for index, hyper in enumerate(graph.hyperedges):
        if hyper.metadata.get("kind") != "stack":
            continue
        name = str(hyper.metadata.get("name", ""))
        lines.append(f"  subgraph {quote(f'cluster_{index}')} {{")
        lines.append(f"    label={quote(name)};")
        lines += [f"    {quote(key)};" for key in hyper.nodes if key not in grouped]
        lines.append("  }")
        grouped.update(hyper.nodes)
    for node in graph.nodes:
        lines.append(f"  {quote(node.key)} [label={quote(node.label)}];")
    for edge in graph.edges:
        names = ", ".join(str(network.get("name", "")) for network in edge.metadata.get("networks", ()))
        lines.append(f"  {quote(edge.source)} {connector} {quote(edge.target)} [label={quote(names)}];")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()
