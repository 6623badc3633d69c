"""Node writes (tier 3: availability, role, removal; tier 2: labels) and their paired reads (labels, role).

Thin views over the ``app.http.writes`` steps; availability and role answer the node's detail read back
from the engine, labels the ``NodeLabels`` sub-resource. Writes wait on the engine (admission-exempt);
the reads are one cached object each (the gate's light lane).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, request
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints import label_views
from app.blueprints.docs import errors, write_documented
from app.errors import ProblemError
from app.http import admission, respond, writes
from app.http.acl_read import require_entry
from app.http.negotiation import negotiated
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.schemas.v1.envelopes import DETAIL_SCHEMAS
from app.schemas.v1.object_writes import LabelsV1, NodeRoleV1
from app.writes import dry_run, objects

blp = Blueprint("node_writes", __name__, description="Node availability, role, labels and removal (gated writes).")
NODE = ResourceKind.NODE
DETAIL = DETAIL_SCHEMAS[NODE]
NOT_FOUND = {404: "No such node (generic about:blank problem)."}
FORCE = {"in": "query", "name": "force", "required": False, "schema": {"type": "string", "enum": ["true"]},
         "description": "true: remove the node even when it is not down (the engine's force)"}


def _set_spec_field(op_name: str, node_id: str, field: str, parse: Callable[[Any], str]) -> Response:
    """Availability and role: one member of the node's spec, from a validated one-member body."""
    op = writes.begin(op_name)
    entry = writes.target(op, NODE, node_id)
    value = parse(writes.json_body())

    def mutate(spec: dict[str, Any]) -> None:
        spec[field] = value

    return writes.update_versioned(op, entry, mutate)


@blp.route("/nodes/<id>/availability")
class Availability(MethodView):
    @admission.exempt
    @write_documented(blp, "update_node_availability", returns=DETAIL, body={
        "type": "object", "required": ["availability"],
        "properties": {"availability": {"type": "string", "enum": list(objects.AVAILABILITIES)}}},
        description="Set the node's availability: active, pause (no new tasks) or drain (tasks move away).")
    def put(self, id: str) -> Response:
        return _set_spec_field("update_node_availability", id, "Availability", objects.availability)


@blp.route("/nodes/<id>/role")
class Role(MethodView):
    @admission.light
    @blp.response(200, NodeRoleV1, description="The node's role, whether it leads, and how many managers.")
    @errors(blp, 403, 404, 503, codes=NOT_FOUND)
    @negotiated()
    def get(self, id: str) -> Response:
        entry = require_entry(label_views.lookup(NODE, id))
        cache = current_runtime().cache
        document = objects.role_document(entry.raw, [node.raw for node in cache.entries(NODE)])
        return respond.with_freshness(writes.answer_document(request.path, "NodeRole", document))

    @admission.exempt
    @write_documented(blp, "update_node_role", returns=DETAIL, body={
        "type": "object", "required": ["role"],
        "properties": {"role": {"type": "string", "enum": list(objects.ROLES)}}},
        description="Promote the node to manager or demote it to worker (the engine refuses to demote the last "
                    "manager).")
    def put(self, id: str) -> Response:
        return _set_spec_field("update_node_role", id, "Role", objects.role)


@blp.route("/nodes/<id>/labels")
class Labels(MethodView):
    @admission.light
    @blp.response(200, LabelsV1, description="The node's labels (Spec.Labels).")
    @errors(blp, 403, 404, 503, codes=NOT_FOUND)
    @negotiated()
    def get(self, id: str) -> Response:
        return label_views.read(NODE, id)

    @admission.exempt
    @write_documented(blp, "put_node_labels", body=label_views.BODY, returns=LabelsV1,
                      description="Replace the node's labels with the given map.")
    def put(self, id: str) -> Response:
        return label_views.put("put_node_labels", NODE, id)

    @admission.exempt
    @write_documented(blp, "patch_node_labels", body=label_views.MERGE, returns=LabelsV1,
                      description="Edit the node's labels: JSON Patch (add, replace, remove, test on keys) or "
                                  "merge patch (null removes).")
    def patch(self, id: str) -> Response:
        return label_views.patch("patch_node_labels", NODE, id)


@blp.route("/nodes/<id>")
class Remove(MethodView):
    @admission.exempt
    @blp.doc(parameters=[FORCE, dry_run.PARAMETER_DOC])
    @write_documented(blp, "remove_node", description=(
        "Remove the node from the swarm. A node that is not down is refused with 409 NOD001 unless force=true; "
        "the engine refuses a manager (demote it first)."))
    def delete(self, id: str) -> Response:
        op = writes.begin("remove_node")
        entry = writes.target(op, NODE, id)
        force = request.args.get("force") == "true"
        state = ((entry.raw.get("Status") or {}).get("State")) or "unknown"
        if not force and state != "down":
            raise ProblemError("NOD001", detail=f"Node {entry.name} is {state}, not down; stop its engine (or let "
                                                "it leave the swarm) first, or pass force=true.")
        if dry_run.active():
            return dry_run.removal(op, entry)
        writes.engine_write(op, NODE, entry.id, lambda: writes.writer().remove("node", entry.id, force=force))
        writes.read_back(op, NODE, entry.id)
        return writes.no_content()
