"""``/topology`` (docs/topology.md): the logical and the physical graph as JGF (JSON, with JSON-LD
members), GraphML or DOT (logical graph only), by Accept or extension (``app.http.graph_formats``). The
legacy flat views ``/topology/networks`` and ``/topology/placement`` carry ``Deprecation: true`` and a
``successor-version`` link to ``/topology``. Graphs are built by ``app.topology``; only JSON bodies get an
ETag (the shared layer validates JSON and feeds). With an ACL policy every view needs at least one grant
and shows only readable services, nodes and tasks (``app.topology``).
"""

from __future__ import annotations

from typing import Any

from flask import Response, request
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors
from app.http import respond
from app.http.acl_read import read_filter, require_grants
from app.http.graph_formats import DOT, GRAPHML, JGF, current_graph_media, graph_negotiated
from app.http.jsonld import CONTEXT_PATH, envelope
from app.http.links import link
from app.http.negotiation import JSON, negotiated
from app.runtime import current_runtime
from app.schemas.v1.topology import NetworkTopologyV1, PlacementTopologyV1, TopologyV1
from app.topology import dot, graphml, jgf, legacy
from app.topology.logical import logical_graph
from app.topology.physical import physical_graph

blp = Blueprint("topology", __name__, description="Services on overlay networks, and tasks on nodes, as graphs.")
_JGF_SCHEMA = {"schema": {"$ref": "#/components/schemas/TopologyV1"}}
# The whole 200 content: flask-smorest's doc() replaces the response's content rather than merging it.
_GRAPH_CONTENT = {"200": {"description": "JGF {graphs: [network, placement]}; GraphML; DOT.", "content": {
    JSON: _JGF_SCHEMA, JGF: _JGF_SCHEMA,
    GRAPHML: {"schema": {"type": "string", "description": "GraphML: both graphs"}},
    DOT: {"schema": {"type": "string", "description": "Graphviz DOT: the logical graph"}}}}}


def _context() -> str:
    return respond.base_path() + CONTEXT_PATH


def _json(object_type: str, path: str, members: dict[str, Any], content_type: str | None = None) -> Response:
    body = envelope(respond.base_path(), path, object_type)
    body.update(members)
    return respond.with_freshness(respond.document(body, content_type=content_type))


def _deprecated(response: Response) -> Response:
    response.headers["Deprecation"] = "true"
    response.headers.add("Link", link(respond.base_path() + "/topology", "successor-version"))
    return response


@blp.route("/topology")
class Topology(MethodView):
    @blp.response(200, TopologyV1, description="JGF {graphs: [network, placement]}; GraphML; DOT.")
    @blp.doc(responses=_GRAPH_CONTENT)
    @errors(blp, 403, 503)
    @graph_negotiated
    def get(self) -> Response:
        require_grants()
        cache, context, media, keep = current_runtime().cache, _context(), current_graph_media(), read_filter()
        logical = logical_graph(cache, context, keep)
        if media == DOT:
            return respond.with_freshness(Response(dot.render(logical), content_type=DOT + "; charset=utf-8"))
        graphs = [logical, physical_graph(cache, context, keep)]
        if media == GRAPHML:
            return respond.with_freshness(Response(graphml.render(graphs), content_type=GRAPHML + "; charset=utf-8"))
        return _json("Topology", "/topology", jgf.document(graphs), content_type=JGF if media == JGF else None)


@blp.route("/topology/networks")
class NetworkTopology(MethodView):
    @blp.response(200, NetworkTopologyV1, description="Deprecated: the logical graph, flat.",
                  headers={"Deprecation": {"schema": {"type": "string"}, "description": "true"}})
    @errors(blp, 403, 503)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        view = legacy.networks_view(logical_graph(current_runtime().cache, _context(), read_filter()))
        return _deprecated(_json("NetworkTopology", request.path, view))


@blp.route("/topology/placement")
class PlacementTopology(MethodView):
    @blp.response(200, PlacementTopologyV1, description="Deprecated: the physical graph, flat.",
                  headers={"Deprecation": {"schema": {"type": "string"}, "description": "true"}})
    @errors(blp, 403, 503)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        view = legacy.placement_view(physical_graph(current_runtime().cache, _context(), read_filter()))
        return _deprecated(_json("PlacementTopology", request.path, view))
