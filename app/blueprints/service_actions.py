"""Service actions (tier 1: scale, image, rollback, restart) and removal (tier 3).

Thin views: each is the script of ``app.http.writes`` steps (gate, target, body, versioned update, answer).
They wait on the engine, not on the CPU, so the admission gate does not hold them.
"""

from __future__ import annotations

from typing import Any

from flask import Response, request
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import fields

from app.blueprints.docs import write_documented
from app.cache.entries import Entry
from app.errors import ProblemError
from app.http import admission, writes
from app.resources import STACK_LABEL, ResourceKind
from app.schemas.v1.envelopes import DETAIL_SCHEMAS
from app.writes import dry_run

blp = Blueprint("service_actions", __name__, description="Service actions and removal (gated writes).")
SERVICE = ResourceKind.SERVICE
# The detail a GET gives, plus ``rollout`` when Prefer: wait=N held the answer (docs/writes.md).
DETAIL = DETAIL_SCHEMAS[SERVICE].from_dict({"rollout": fields.Dict(metadata={
    "description": "with Prefer: wait=N, the rollout's outcome: {settled, state (the update state, converged, "
                   "timeout, or interrupted by a worker shutdown), waitedSeconds, runningTasks?, desiredTasks?, "
                   "updateState? (when interrupted), message?}"})}, name="ServiceWriteDetailV1")


def _service(op_name: str, service_id: str) -> tuple[Any, Entry]:
    op = writes.begin(op_name)
    return op, writes.target(op, SERVICE, service_id)


@blp.route("/services/<id>/scale")
@admission.exempt
class Scale(MethodView):
    @write_documented(blp, "scale_service", returns=DETAIL, description="Set the number of replicas.", body={
        "type": "object", "required": ["replicas"],
        "properties": {"replicas": {"type": "integer", "minimum": 0}}})
    def put(self, id: str) -> Response:
        op, entry = _service("scale_service", id)
        body = writes.require_object(writes.json_body())
        replicas = body.get("replicas")
        if "replicas" not in body:
            raise ProblemError("SVC004", detail="The body needs replicas (a non-negative integer).")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ProblemError("SVC004", detail=f"replicas must be a non-negative integer, not {replicas!r}.")
        if "Replicated" not in ((entry.raw.get("Spec") or {}).get("Mode") or {}):
            raise ProblemError("SVC005", detail=f"Service {entry.name} is not replicated; it cannot be scaled.")

        def mutate(spec: dict[str, Any]) -> None:
            spec["Mode"]["Replicated"]["Replicas"] = replicas

        return writes.update_versioned(op, entry, mutate)


@blp.route("/services/<id>/image")
@admission.exempt
class Image(MethodView):
    @write_documented(blp, "update_service_image", returns=DETAIL, description="Set the image (a rolling update).",
                      body={"type": "object", "required": ["image"],
                            "properties": {"image": {"type": "string", "minLength": 1}}})
    def put(self, id: str) -> Response:
        op, entry = _service("update_service_image", id)
        body = writes.require_object(writes.json_body())
        image = body.get("image")
        if not isinstance(image, str) or not image.strip():
            raise ProblemError("SVC006", detail="The body needs image, a non-empty string.")

        def mutate(spec: dict[str, Any]) -> None:
            spec.setdefault("TaskTemplate", {}).setdefault("ContainerSpec", {})["Image"] = image.strip()

        return writes.update_versioned(op, entry, mutate)


@blp.route("/services/<id>/rollback")
@admission.exempt
class Rollback(MethodView):
    @write_documented(blp, "rollback_service", returns=DETAIL,
                      description="Revert to the previous spec (the engine's server-side rollback).")
    def post(self, id: str) -> Response:
        op, entry = _service("rollback_service", id)
        if not entry.raw.get("PreviousSpec"):
            raise ProblemError("SVC007", detail=f"Service {entry.name} has no previous spec to roll back to.")
        return writes.update_versioned(op, entry, lambda spec: None, rollback=True)


@blp.route("/services/<id>/restart")
@admission.exempt
class Restart(MethodView):
    @write_documented(blp, "restart_service", returns=DETAIL,
                      description="Replace every task (bumps TaskTemplate.ForceUpdate: a rolling update).")
    def post(self, id: str) -> Response:
        op, entry = _service("restart_service", id)

        def mutate(spec: dict[str, Any]) -> None:
            template = spec.setdefault("TaskTemplate", {})
            template["ForceUpdate"] = int(template.get("ForceUpdate") or 0) + 1

        return writes.update_versioned(op, entry, mutate)


@blp.route("/services/<id>")
@admission.exempt
class Remove(MethodView):
    @write_documented(blp, "remove_service", description=(
        "Remove the service. A service deployed by a stack is refused with 409 SVC002 unless force=true "
        "(removing one member leaves the stack out of step with its compose file)."))
    def delete(self, id: str) -> Response:
        op, entry = _service("remove_service", id)
        labels = (entry.raw.get("Spec") or {}).get("Labels") or {}
        if labels.get(STACK_LABEL) and request.args.get("force") != "true":
            raise ProblemError("SVC002", detail=f"Service {entry.name} belongs to stack {labels[STACK_LABEL]}; "
                                                "remove the stack, or pass force=true.")
        if dry_run.active():
            return dry_run.removal(op, entry)
        writes.engine_write(op, SERVICE, entry.id, lambda: writes.writer().remove("service", entry.id))
        writes.read_back(op, SERVICE, entry.id)
        return writes.no_content()
