"""Writes of tasks, configs, secrets, networks, volumes and stacks, and the labels reads of configs and secrets.

Thin views over the ``app.http.writes`` steps: creates answer 201 + ``Location`` with the detail read back
from the engine; removals 204 (a stack: what was removed, and what the engine refused). Each removal that
the cache can foresee failing (a config, secret or network still used by a service) is refused before the
engine is called; the engine's own refusals get the same codes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from flask import Response, request
from flask.blueprints import BlueprintSetupState
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.routing import Map, UnicodeConverter

from app.blueprints import label_views
from app.blueprints.docs import errors, write_documented
from app.cache.entries import Entry
from app.engine.writes import WriteFailure
from app.errors import ProblemError
from app.http import admission, writes
from app.http.negotiation import negotiated
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.schemas.v1.envelopes import DETAIL_SCHEMAS
from app.schemas.v1.object_writes import LabelsV1, StackRemovalV1
from app.writes import dry_run, objects
from app.writes.stack_removal import remove_members

blp = Blueprint("object_writes", __name__,
                description="Task, config, secret, network, volume and stack writes (gated writes).")
TASK, STACK = ResourceKind.TASK, ResourceKind.STACK
CONFIG, SECRET = ResourceKind.CONFIG, ResourceKind.SECRET
NETWORK, VOLUME = ResourceKind.NETWORK, ResourceKind.VOLUME
ENDED = frozenset({"complete", "shutdown", "failed", "rejected", "remove", "orphaned"})
PREDEFINED_NETWORKS = frozenset({"bridge", "host", "none"})
IN_USE = {CONFIG: "CFG001", SECRET: "SEC001", NETWORK: "NET001"}
TAKEN = {CONFIG: "CFG003", SECRET: "SEC003", NETWORK: "NET003"}
FORCE = {"in": "query", "name": "force", "required": False, "schema": {"type": "string", "enum": ["true"]},
         "description": "true: the engine's force"}


def _remove(op_name: str, kind: ResourceKind, object_id: str, *, force: bool = False,
            check: Callable[[Entry], None] | None = None) -> Response:
    """Gate, target, the cache's pre-check, one engine removal, read-back: 204."""
    op = writes.begin(op_name)
    entry = writes.target(op, kind, object_id)
    if check is not None:
        check(entry)
    if dry_run.active():
        return dry_run.removal(op, entry)
    writes.engine_write(op, kind, entry.id, lambda: writes.writer().remove(kind.value, entry.id, force=force))
    writes.read_back(op, kind, entry.id)
    return writes.no_content()


def _created(location: str, fresh: Entry | None) -> Response:
    """201 + Location with the detail; with ``return=minimal`` an empty body."""
    return writes.created(location, lambda: writes.answer_detail(fresh, status=201))


def _not_used(entry: Entry) -> None:
    """Configs, secrets and networks a service still references cannot go (the engine says the same)."""
    users = current_runtime().cache.services_using(entry.kind, entry.id)
    if users:
        names = ", ".join(user.name for user in users[:10]) + (" ..." if len(users) > 10 else "")
        raise ProblemError(IN_USE[entry.kind], detail=f"{entry.kind.value.capitalize()} {entry.name} is used by "
                                                      f"{len(users)} service(s): {names}.")


def _name_free(kind: ResourceKind, name: str) -> None:
    if any(entry.name == name for entry in current_runtime().cache.entries(kind)):
        raise ProblemError(TAKEN[kind], detail=f"A {kind.value} named {name!r} already exists.")


# ---------------------------------------------------------------------------------------------- tasks
@blp.route("/tasks/<id>")
class Task(MethodView):
    @admission.exempt
    @write_documented(blp, "remove_task", description=(
        "Remove the task's container, so the scheduler replaces the task (the engine has no task removal). "
        "The container must be on the engine this service talks to (else 409 TSK003); a task that has "
        "already ended is 409 TSK001."))
    def delete(self, id: str) -> Response:
        op = writes.begin("remove_task")
        entry = writes.target(op, TASK, id)
        writer = writes.writer()
        try:
            raw = writer.inspect("task", entry.id)
        except WriteFailure as failure:
            if failure.reason != "not_found":
                raise writes.failure_problem(op, failure) from None
            writes.read_back(op, TASK, entry.id)
            raise ProblemError("TSK001", detail=f"Task {entry.id} no longer exists on the engine.") from None
        status = raw.get("Status") or {}
        state = status.get("State") or "unknown"
        if state in ENDED:
            raise ProblemError("TSK001", detail=f"Task {entry.id} has already ended ({state}); the scheduler "
                                                "replaces tasks that end.")
        container = str((status.get("ContainerStatus") or {}).get("ContainerID") or "")
        try:
            present = bool(container) and writer.has_container(container)
        except WriteFailure as failure:
            raise writes.failure_problem(op, failure) from None
        if not present:
            where = "it has no container yet" if not container else "its container is on another node's engine"
            raise ProblemError("TSK003", detail=f"Task {entry.id} ({state}): {where}.")
        if dry_run.active():
            return dry_run.removal(op, entry, note="the scheduler replaces the task")
        writes.engine_write(op, TASK, entry.id, lambda: writer.remove_container(container))
        writes.read_back(op, TASK, entry.id)
        return writes.no_content()


# ---------------------------------------------------------------------------------------------- configs, secrets
def _config_routes(kind: ResourceKind) -> None:
    plural, key = kind.spec.plural, kind.value
    what = "content in base64" if kind is CONFIG else "content in base64 (never answered back)"
    body_schema = {"type": "object", "required": ["name", "data"], "additionalProperties": False, "properties": {
        "name": {"type": "string", "pattern": objects.CONFIG_NAME.pattern, "maxLength": objects.MAX_CONFIG_NAME},
        "data": {"type": "string", "contentEncoding": "base64", "description": what},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}

    class Collection(MethodView):
        @admission.exempt
        @write_documented(blp, f"create_{key}", body=body_schema, returns=DETAIL_SCHEMAS[kind], success=201,
                          description=f"Create a {key}; the answer is its detail with Location.")
        def post(self) -> Response:
            op = writes.begin(f"create_{key}")
            body = objects.config_create(key, writes.json_body())
            writes.require_stack_write(body["Labels"])   # a stack label needs write on the stack
            _name_free(kind, body["Name"])
            if dry_run.active():
                return dry_run.create(op, kind, body)
            new_id = writes.engine_write(op, None, None, lambda: writes.writer().create(key, body))
            fresh = writes.read_back(op, kind, new_id)
            return _created(f"/{plural}/{new_id}", fresh)

    class Detail(MethodView):
        @admission.exempt
        @write_documented(blp, f"remove_{key}", description=f"Remove the {key}; 409 when a service uses it.")
        def delete(self, id: str) -> Response:
            return _remove(f"remove_{key}", kind, id, check=_not_used)

    class Labels(MethodView):
        @admission.light
        @blp.response(200, LabelsV1, description=f"The {key}'s labels (Spec.Labels).")
        @errors(blp, 403, 404, 503, codes={404: f"No such {key} (generic about:blank problem)."})
        @negotiated()
        def get(self, id: str) -> Response:
            return label_views.read(kind, id)

        @admission.exempt
        @write_documented(blp, f"put_{key}_labels", body=label_views.BODY, returns=LabelsV1,
                          description=f"Replace the {key}'s labels (the only part of a {key} that can change).")
        def put(self, id: str) -> Response:
            return label_views.put(f"put_{key}_labels", kind, id)

        @admission.exempt
        @write_documented(blp, f"patch_{key}_labels", body=label_views.MERGE, returns=LabelsV1,
                          description=f"Edit the {key}'s labels: JSON Patch or merge patch.")
        def patch(self, id: str) -> Response:
            return label_views.patch(f"patch_{key}_labels", kind, id)

    for view, rule, name in ((Collection, f"/{plural}", "Collection"), (Detail, f"/{plural}/<id>", "Detail"),
                             (Labels, f"/{plural}/<id>/labels", "Labels")):
        view.__name__ = view.__qualname__ = f"{kind.spec.jsonld_type}{name}Writes"
        blp.route(rule)(view)


_config_routes(CONFIG)
_config_routes(SECRET)


# ---------------------------------------------------------------------------------------------- networks
@blp.route("/networks")
class Networks(MethodView):
    @admission.exempt
    @write_documented(blp, "create_network", returns=DETAIL_SCHEMAS[NETWORK], success=201, body={
        "type": "object", "required": ["name"], "additionalProperties": False, "properties": {
            "name": {"type": "string", "pattern": objects.NETWORK_NAME.pattern},
            "driver": {"type": "string", "default": "overlay"},
            "attachable": {"type": "boolean", "default": False},
            "internal": {"type": "boolean", "default": False},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "options": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "driver options"}}},
        description="Create a network (overlay by default: swarm-wide); the answer is its detail with Location.")
    def post(self) -> Response:
        op = writes.begin("create_network")
        body = objects.network_create(writes.json_body())
        writes.require_stack_write(body["Labels"])   # a stack label needs write on the stack
        _name_free(NETWORK, body["Name"])
        if dry_run.active():
            return dry_run.create(op, NETWORK, body)
        new_id = writes.engine_write(op, None, None, lambda: writes.writer().create("network", body))
        fresh = writes.read_back(op, NETWORK, new_id)
        return _created(f"/networks/{new_id}", fresh)


def _removable_network(entry: Entry) -> None:
    if entry.name in PREDEFINED_NETWORKS:
        raise ProblemError("ENG003", detail=f"Network {entry.name} is pre-defined by the engine; it cannot be removed.")
    _not_used(entry)


@blp.route("/networks/<id>")
class Network(MethodView):
    @admission.exempt
    @write_documented(blp, "remove_network", description="Remove the network; 409 NET001 while it is in use.")
    def delete(self, id: str) -> Response:
        return _remove("remove_network", NETWORK, id, check=_removable_network)


# ---------------------------------------------------------------------------------------------- volumes
@blp.route("/volumes")
class Volumes(MethodView):
    @admission.exempt
    @blp.alt_response(200, schema={"anyOf": [DETAIL_SCHEMAS[VOLUME], dry_run.SCHEMA]}, description=(
        "A volume of that name exists already: it is answered, unchanged (the engine's create is idempotent "
        "for volumes); with dryRun=true, what would be created."))
    @write_documented(blp, "create_volume", returns=DETAIL_SCHEMAS[VOLUME], success=201, body={
        "type": "object", "required": ["name"], "additionalProperties": False, "properties": {
            "name": {"type": "string", "pattern": objects.VOLUME_NAME.pattern},
            "driver": {"type": "string", "default": "local"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "driverOpts": {"type": "object", "additionalProperties": {"type": "string"}}}},
        description="Create a volume on the engine this service talks to; the answer is its detail with Location.")
    def post(self) -> Response:
        op = writes.begin("create_volume")
        body = objects.volume_create(writes.json_body())
        writes.require_stack_write(body["Labels"])   # a stack label needs write on the stack
        name = body["Name"]
        writer = writes.writer()
        try:
            writer.inspect("volume", name)
            existed = True
        except WriteFailure as failure:
            if failure.reason != "not_found":
                raise writes.failure_problem(op, failure) from None
            existed = False
        if dry_run.active():
            if existed:
                return dry_run.unchanged(op, VOLUME, current_runtime().cache.get(VOLUME, name), name,
                                         f"volume {name} exists; it would be answered unchanged")
            return dry_run.create(op, VOLUME, body)
        if existed:
            return writes.minimal_or(lambda: writes.answer_detail(writes.read_back(op, VOLUME, name)))
        new_name = writes.engine_write(op, None, None, lambda: writer.create("volume", body)) or name
        fresh = writes.read_back(op, VOLUME, new_name)
        return _created(f"/volumes/{new_name}", fresh)


@blp.route("/volumes/<name>")
class Volume(MethodView):
    @admission.exempt
    @blp.doc(parameters=[FORCE, dry_run.PARAMETER_DOC])
    @write_documented(blp, "remove_volume", description="Remove the volume; 409 VOL001 while a container uses it.")
    def delete(self, name: str) -> Response:
        return _remove("remove_volume", VOLUME, name, force=request.args.get("force") == "true")


# ---------------------------------------------------------------------------------------------- stacks
class StackName(UnicodeConverter):
    """A stack name in a write URL, never the reserved ``summary``: ``/stacks/summary`` is the summary
    collection (GET only), so ``DELETE /stacks/summary`` must not match this rule and remove a stack called
    "summary" (docs/writes-objects.md). With the rule out of the match, werkzeug answers 405 with the summary's own
    methods (GET, HEAD, OPTIONS). A stack really named "summary" cannot be removed through this URL: remove
    its services (``DELETE /services/{id}``) or use ``docker stack rm``."""

    RESERVED = "summary"

    def __init__(self, url_map: Map) -> None:
        super().__init__(url_map)
        self.regex = f"(?!{self.RESERVED}$)[^/]{{1,}}"   # ``{1,}`` keeps the OpenAPI minLength 1


def _register_stack_name(state: BlueprintSetupState) -> None:
    state.app.url_map.converters.setdefault("stack", StackName)


blp.record_once(_register_stack_name)   # before the rule below is added


@blp.route("/stacks/<stack:name>")
class Stack(MethodView):
    @admission.exempt
    @write_documented(blp, "remove_stack", returns=StackRemovalV1, description=(
        "Remove the stack's services, then its networks, secrets and configs (volumes are kept), as "
        "docker stack rm does. Members already gone are skipped; refusals are listed in errors."))
    def delete(self, name: str) -> Response:
        op = writes.begin("remove_stack")
        entry = writes.target(op, STACK, name)
        runtime = current_runtime()
        kinds = (ResourceKind.SERVICE, NETWORK, SECRET, CONFIG)
        members = {kind: [member.id for member in runtime.cache.stack_members(entry.name, kind)] for kind in kinds}
        if dry_run.active():
            return dry_run.removal(op, entry, [member for kind in kinds
                                               for member in runtime.cache.stack_members(entry.name, kind)],
                                   note="volumes are kept")
        writer = writes.writer()

        def remove(kind: ResourceKind, object_id: str) -> None:
            withdraw = runtime.audit.expect(kind, object_id, writes.audit_stamp())
            try:
                writer.remove(kind.value, object_id)
            except WriteFailure:
                withdraw()
                raise

        outcome = remove_members(members, remove)
        for kind, ids in members.items():
            for object_id in ids:
                with contextlib.suppress(ProblemError):   # the watcher brings the state in anyway
                    writes.read_back(op, kind, object_id)
        return writes.minimal_or(lambda: writes.answer_document(f"/stacks/{entry.name}", "StackRemoval",
                                                                outcome.document()))
