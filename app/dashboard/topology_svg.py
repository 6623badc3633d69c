"""The topology page's drawings: the topology's graphs as DOT, laid out by Graphviz ``dot -Tsvg``.

The logical graph is drawn from the same DOT as ``/topology.dot`` (``app.topology.dot.render``), rebuilt
from the page's own JGF answer (already narrowed by the ACL), with a ``URL`` per node so every box links to
its detail page. The placement graph (DOT has no form of its own for it) is drawn here: swarm nodes and
services as boxes, one edge per service and node labelled with its tasks' states.

Why a child process waited on cooperatively: the layout runs in ``dot``, outside this process; under gevent
the ``subprocess`` module is gevent's, so waiting for its pipes yields to the hub (a threadpool thread
would only add a thread that waits on the same process). Each run is bounded (``TIMEOUT`` seconds, then the
process is killed) and each answer is cached by the DOT text's hash in a small LRU (a graph that did not
change is not laid out again; concurrent asks for one graph share one run). The SVG is made inline-safe:
no XML prolog, doctype or comments, no ``style`` attributes (the CSP forbids inline styles), an
accessible name on the root; its pt size stays (CSS caps the width, the viewBox keeps the proportions).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app
from gevent.event import AsyncResult
from markupsafe import Markup

from app.topology import dot
from app.topology.model import URN_PREFIX, Graph, GraphEdge, GraphNode, HyperEdge

COMMAND: tuple[str, ...] = ("dot", "-Tsvg")
TIMEOUT = 5.0              # seconds for one layout
CACHE_SIZE = 16            # drawings kept (a few graphs x both views x a couple of versions)
MAX_NODES = 300            # larger graphs are not drawn: a table reads better, and dot grows superlinearly
_DETAIL = {"service": "/services/", "node": "/nodes/", "task": "/tasks/", "network": "/networks/"}


@dataclass(frozen=True, slots=True)
class Drawing:
    """An SVG (inline-safe markup) or why there is none: ``missing`` (no dot), ``timeout``, ``failed``,
    ``too_large``."""
    svg: Markup | None
    error: str | None = None
    detail: str = ""


class SvgCache:
    """Bounded LRU of drawings by DOT hash; one run per key at a time."""

    def __init__(self, size: int = CACHE_SIZE, *, command: Sequence[str] = COMMAND,
                 timeout: float = TIMEOUT) -> None:
        self.size = size
        self.command = tuple(command)
        self.timeout = timeout
        self.entries: OrderedDict[str, Drawing] = OrderedDict()
        self.running: dict[str, AsyncResult] = {}
        self.runs = 0      # layouts started (tests: a cache hit starts none)

    def get(self, dot_text: bytes) -> Drawing:
        key = hashlib.sha256(dot_text).hexdigest()
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        pending = self.running.get(key)
        if pending is not None:
            drawing: Drawing = pending.get()
            return drawing
        pending = self.running[key] = AsyncResult()
        try:
            self.runs += 1
            drawing = layout(dot_text, command=self.command, timeout=self.timeout)
        finally:
            del self.running[key]
        if drawing.error != "missing":       # dot may be installed later: do not remember its absence
            self.entries[key] = drawing
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        pending.set(drawing)
        return drawing


def layout(dot_text: bytes, *, command: Sequence[str] = COMMAND, timeout: float = TIMEOUT) -> Drawing:
    """``dot -Tsvg`` of ``dot_text``, made inline-safe; bounded by ``timeout`` seconds."""
    try:
        done = subprocess.run(list(command), input=dot_text, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return Drawing(None, "missing", "Graphviz (the dot program) is not installed on the server.")
    except subprocess.TimeoutExpired:
        return Drawing(None, "timeout", f"Graphviz did not lay the graph out within {timeout:g} s.")
    except OSError as error:
        return Drawing(None, "failed", f"Graphviz could not run: {error.strerror or error}.")
    if done.returncode != 0 or b"<svg" not in done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        return Drawing(None, "failed", "Graphviz failed" + (f": {message[0]}" if message else "."))
    return Drawing(Markup(inline_svg(done.stdout.decode("utf-8", "replace"))))


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_STYLE_ATTR = re.compile(r"""\sstyle\s*=\s*("[^"]*"|'[^']*')""")
_STYLE_ELEMENT = re.compile(r"<style\b.*?</style>", re.S)
_KEY_TITLE = re.compile(r"<title>urn:[^<]*</title>\n?")   # node and edge titles are URNs: the links say more


def inline_svg(text: str) -> str:
    """The SVG element alone: prolog, doctype, comments, ``style`` attributes and elements removed; the
    URN titles of nodes and edges dropped (each node's link carries its name); a named group for assistive
    tech."""
    text = _PROLOG.sub("", text, count=1)
    text = _COMMENT.sub("", text)
    text = _STYLE_ELEMENT.sub("", text)
    text = _STYLE_ATTR.sub("", text)
    text = _KEY_TITLE.sub("", text)
    head, sep, rest = text.partition(">")
    return head + ' role="group" aria-label="Topology graph"' + sep + rest


def graph_from_jgf(body: dict[str, Any]) -> Graph:
    """The model of one JGF graph of the page's answer (``app.topology.jgf.graph`` reversed)."""
    graph = Graph(id=str(body.get("id", "")), type=str(body.get("type", "")), label=str(body.get("label", "")),
                  directed=bool(body.get("directed", False)), metadata=dict(body.get("metadata") or {}))
    for key, node in (body.get("nodes") or {}).items():
        graph.nodes.append(GraphNode(key, str(node.get("label", key)), dict(node.get("metadata") or {})))
    for edge in body.get("edges") or ():
        graph.edges.append(GraphEdge(edge["source"], edge["target"], dict(edge.get("metadata") or {})))
    for hyper in body.get("hyperedges") or ():
        graph.hyperedges.append(HyperEdge(list(hyper.get("nodes") or ()), dict(hyper.get("metadata") or {})))
    return graph


def detail_href(key: str, base: str) -> str | None:
    """``urn:service:<kind>:<id>`` → the object's page (base path included), or None."""
    if not key.startswith(URN_PREFIX):
        return None
    kind, _, object_id = key[len(URN_PREFIX):].partition(":")
    prefix = _DETAIL.get(kind)
    return f"{base}{prefix}{object_id}" if prefix and object_id else None


def _with_links(text: bytes, graph: Graph, base: str) -> bytes:
    """DOT merges repeated node statements: a ``URL`` and a tooltip per node, added before the close."""
    extra = []
    for node in graph.nodes:
        href = detail_href(node.key, base)
        if href is not None:
            extra.append(f"  {dot.quote(node.key)} [URL={dot.quote(href)}, tooltip={dot.quote(node.label)}];")
    body = text.decode().rstrip()   # ends with the graph's closing brace
    return (body[:-1] + "\n".join(extra) + "\n}\n").encode()


def logical_dot(graph: Graph, base: str) -> bytes:
    """``/topology.dot`` of this graph, nodes linked to their pages."""
    return _with_links(dot.render(graph), graph, base)


def placement_dot(graph: Graph, base: str) -> bytes:
    """Services (left) and swarm nodes (right), an edge per service and node: its tasks there by state."""
    lines = [f"graph {dot.quote(graph.id or 'placement')} {{", "  rankdir=LR;", "  node [shape=box];"]
    for node in graph.nodes:
        kind = node.metadata.get("kind")
        if kind == "node":
            label = f"{node.label}\n{node.metadata.get('role', '')} · {node.metadata.get('state', '')}"
            lines.append(f"  {dot.quote(node.key)} [label={dot.quote(label)}, shape=box3d];")
        else:
            lines.append(f"  {dot.quote(node.key)} [label={dot.quote(node.label)}];")
    for hyper in graph.hyperedges:
        if hyper.metadata.get("kind") != "placement" or not hyper.nodes:
            continue
        service = hyper.nodes[0]
        for member in hyper.nodes[1:]:
            states: dict[str, int] = {}
            for task in hyper.metadata.get("tasks") or ():
                if task.get("node") == member:
                    states[str(task.get("state"))] = states.get(str(task.get("state")), 0) + 1
            label = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
            lines.append(f"  {dot.quote(service)} -- {dot.quote(member)} [label={dot.quote(label)}];")
    lines.append("}")
    return _with_links(("\n".join(lines) + "\n").encode(), graph, base)


def draw(body: dict[str, Any] | None, base: str, cache: SvgCache) -> Drawing:
    """The drawing of one JGF graph of the page (``network`` logical, ``placement`` physical)."""
    if not body:
        return Drawing(None, "failed", "The answer has no such graph.")
    graph = graph_from_jgf(body)
    if len(graph.nodes) > MAX_NODES:
        return Drawing(None, "too_large", f"{len(graph.nodes)} nodes are too many to draw ({MAX_NODES} at most).")
    text = placement_dot(graph, base) if graph.id == "placement" else logical_dot(graph, base)
    return cache.get(text)


EXTENSION_KEY = "topology_svg"


def init_topology_svg(app: Flask) -> None:
    """Give templates ``topology_svg(graph_json)`` → Drawing, with one cache per app
    (``app.extensions[EXTENSION_KEY]``)."""
    app.extensions[EXTENSION_KEY] = SvgCache()
    app.jinja_env.globals["topology_svg"] = _topology_svg


def _topology_svg(body: dict[str, Any] | None) -> Drawing:
    from app.runtime import current_runtime

    cache: SvgCache = current_app.extensions[EXTENSION_KEY]
    return draw(body, current_runtime().settings.base_path, cache)

