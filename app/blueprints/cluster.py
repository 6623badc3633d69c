"""Cluster-wide reads: ``/cluster`` (overview), ``/cluster/capacity``, ``/disk-usage`` and
``/stacks/summary``. Computed from the cache by ``app.cluster``, except disk usage, which asks the engine
(``app.engine.system``). With an ACL policy each needs the caller to hold at least one grant
(docs/acl.md); ``/stacks/summary`` lists only readable stacks and ``/cluster/capacity`` only readable nodes (rows
and totals); the overview stays cluster-wide counts (no names; ``localNodeID`` only when that node is
readable).
``/stacks/summary`` is a static rule and werkzeug ranks static rules before
``/stacks/<name>``, so it wins over a stack named "summary" (that stack stays listed in ``/stacks``); the
stack removal rule's converter refuses "summary", so DELETE here is 405, never a removal (object_writes).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, current_app, request
from flask.blueprints import BlueprintSetupState
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors
from app.cluster.capacity import capacity
from app.cluster.overview import overview
from app.cluster.stacks import summaries
from app.engine.system import SystemInfo, docker_client
from app.http import admission, respond
from app.http.acl_read import may_read, read_filter, require_grants
from app.http.jsonld import envelope
from app.http.negotiation import negotiated
from app.resources import ResourceKind
from app.runtime import current_runtime, runtime_of
from app.schemas.v1.cluster import CapacityV1, ClusterV1, DiskUsageCollectionV1, StackSummaryCollectionV1

SYSTEM_KEY = "shoal.system"
blp = Blueprint("cluster", __name__, description="Cluster-wide counts, capacity, disk usage and stack summaries.")
_ENGINE_ERRORS = {503: "Engine unreachable, or first sync not done (ENG001).",
                  501: "The engine does not report disk usage (SWM004).",
                  500: "The engine failed to report disk usage (SWM005), or an unexpected failure."}


@blp.record_once
def _install_system(state: BlueprintSetupState) -> None:
    app = state.app
    assert isinstance(app, Flask)
    settings = runtime_of(app).settings
    app.extensions.setdefault(SYSTEM_KEY, SystemInfo(docker_client(settings.docker_host,
                                                                   settings.docker_api_version)))


def system_info() -> SystemInfo:
    system = current_app.extensions[SYSTEM_KEY]
    assert isinstance(system, SystemInfo)
    return system


def _document(object_type: str, members: dict[str, Any]) -> Response:
    body = envelope(respond.base_path(), request.path, object_type)
    body.update(members)
    return respond.with_freshness(respond.document(body))


def _collection(items: list[dict[str, Any]]) -> Response:
    return _document("Collection", {"items": items, "total": len(items), "limit": len(items), "offset": 0})


@blp.route("/cluster")
class Cluster(MethodView):
    @blp.response(200, ClusterV1, description="Counts and health of the whole cluster.")
    @errors(blp, 403, 503)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        runtime = current_runtime()
        local = system_info().local_node_id()
        local_node = runtime.cache.get(ResourceKind.NODE, local) if local else None
        return _document("Cluster", overview(runtime.cache, prometheus_configured=bool(runtime.settings.prometheus_url),
                                             local_node_id=local if local_node is None or may_read(local_node)
                                             else None))


@blp.route("/cluster/capacity")
class Capacity(MethodView):
    @blp.response(200, CapacityV1, description="CPU and memory per node and in total: offered, reserved, left.")
    @errors(blp, 403, 503)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return _document("ClusterCapacity", capacity(current_runtime().cache, read_filter()))


@blp.route("/disk-usage")
@admission.exempt   # waits on the engine (docker system df), computes nothing
class DiskUsage(MethodView):
    @blp.response(200, DiskUsageCollectionV1, description="images, containers, volumes, buildCache.")
    @errors(blp, 403, 501, 503, codes=_ENGINE_ERRORS)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return _collection(system_info().disk_usage())


@blp.route("/stacks/summary")
class StackSummary(MethodView):
    @blp.response(200, StackSummaryCollectionV1, description="One row per stack, by name; unpaginated.")
    @errors(blp, 403, 503)
    @negotiated()
    def get(self) -> Response:
        require_grants()
        return _collection(summaries(current_runtime().cache, read_filter()))
