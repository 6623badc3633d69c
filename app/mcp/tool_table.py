"""The 23 agent tools: name, title, description, input schema, the four hints, and the REST write each runs.

Why a table tied to the write table: a write tool *is* a REST write (``app.writes.operations``, rows with
``tool=``), run through the same view (``app.mcp.tool_dispatch``). Its tier is that row's tier, never a
second copy (an assertion at import checks every row naming the tool agrees); ``get_logs`` and ``search``
read (tier 0). Every write tool takes ``dryRun``: the REST write's ``?dryRun=true``
(docs/agent-tools.md).

The hints are the agents' reading of what a call does: ``readOnlyHint`` for the two reads, ``destructiveHint``
where a call replaces tasks or removes something (image, rollback, restart, placement, ports, availability,
role, removals), ``idempotentHint`` where the same arguments twice change nothing the second time;
``openWorldHint`` is false everywhere (the tools touch only this swarm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.resources import ResourceKind
from app.writes.operations import MERGE_PATCH, OPERATIONS, Operation, Tier
from app.writes.service_schemas import VALUE_SCHEMAS

Args = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RestCall:
    """One REST request, relative to the base path: what a write tool's arguments become."""

    method: str
    path: str
    body: Any = None
    content_type: str = "application/json"
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    title: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    destructive: bool
    idempotent: bool
    acl_types: tuple[str, ...]            # grant types through which some object could be reachable
    operation: str | None = None          # the write-table row this tool runs (None: a read tool)
    kind: ResourceKind | None = None      # the object a write answers (its detail), None for reads
    removal: bool = False
    call: Callable[[Args], RestCall] | None = None

    @property
    def read_only(self) -> bool:
        return self.operation is None

    @property
    def tier(self) -> Tier:
        return Tier.READ if self.operation is None else OPERATIONS[self.operation].tier

    @property
    def row(self) -> Operation | None:
        return OPERATIONS[self.operation] if self.operation is not None else None

    def input_schema(self) -> dict[str, Any]:
        properties = dict(self.properties)
        if not self.read_only:
            properties["dryRun"] = DRY_RUN
        return {"type": "object", "properties": properties, "required": list(self.required),
                "additionalProperties": False}

    def annotations(self) -> dict[str, Any]:
        return {"title": self.title, "readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": False}

    def listing(self) -> dict[str, Any]:
        """The ``tools/list`` entry."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.input_schema(), "annotations": self.annotations()}


DRY_RUN: dict[str, Any] = {"type": "boolean", "default": False,
                           "description": "true: check everything the write checks and answer what would change "
                                          "(the field diff), without changing anything"}
_ID = {"type": "string", "minLength": 1}


def _id(what: str) -> dict[str, Any]:
    return {**_ID, "description": what}


SERVICE_ID = _id("service id or name")
NODE_ID = _id("node id or hostname")
_MERGE_MAP = {"type": "object", "additionalProperties": {"type": ["string", "null"]},
              "description": "merged into the current map: a string sets the key, null removes it, omitted keys "
                             "are kept"}


def _svc(id_: str, suffix: str = "") -> str:
    return f"/services/{id_}{suffix}"


def _sub_tool(name: str, title: str, sub: str, arg: str, description: str, *, destructive: bool = False,
              merge: bool = False) -> ToolDef:
    """A service sub-resource write: PUT of the whole value, or (env, labels) a merge patch of the map."""
    schema = _MERGE_MAP if merge else {**VALUE_SCHEMAS[sub], "description": description}
    op = f"{'patch' if merge else 'put'}_service_{sub.replace('-', '_')}"

    def call(args: Args) -> RestCall:
        if merge:
            return RestCall("PATCH", _svc(args["id"], f"/{sub}"), args[arg], MERGE_PATCH)
        return RestCall("PUT", _svc(args["id"], f"/{sub}"), args[arg])

    return ToolDef(name, title, description, {"id": SERVICE_ID, arg: schema}, ("id", arg), destructive, True,
                   ("service", "stack"), op, ResourceKind.SERVICE, call=call)


def _remove(kind: ResourceKind, title: str, acl: tuple[str, ...], *, force: bool = False) -> ToolDef:
    key = "name" if kind is ResourceKind.VOLUME else "id"
    properties: dict[str, Any] = {key: _id(f"{kind.value} {'name' if key == 'name' else 'id or name'}")}
    if force:
        properties["force"] = {"type": "boolean", "default": False,
                               "description": "remove it even when the engine says it is in use"}

    def call(args: Args) -> RestCall:
        query = {"force": "true"} if args.get("force") else {}
        return RestCall("DELETE", f"{kind.spec.path}/{args[key]}", query=query)

    name = f"remove_{kind.value}"
    return ToolDef(name, title, f"Remove the {kind.value}. Answers {{\"removed\": true}}.", properties, (key,),
                   True, False, acl, name, kind, removal=True, call=call)


TOOLS: tuple[ToolDef, ...] = (
    # ------------------------------------------------------------------------------------------ tier 0
    ToolDef("get_logs", "Read service logs",
            "Recent log lines of a service (all its tasks), oldest first, and a cursor: pass the cursor as since "
            "on the next call to get only newer lines. level keeps lines at that severity or above (a best-effort "
            "text match; lines without a marked level count as info).",
            {"service": SERVICE_ID,
             "tail": {"type": "integer", "default": 100, "description": "lines at most (≤0: 100; over 1000: 1000)"},
             "since": {"type": "string", "description": "RFC 3339 (nanoseconds) timestamp: lines at or after it; "
                                                        "the cursor of the previous call"},
             "level": {"enum": ["debug", "info", "warn", "error"], "description": "minimum severity"}},
            ("service",), False, True, ("service", "stack")),
    ToolDef("search", "Search the swarm",
            "Find services, stacks, nodes, tasks, configs, secrets, networks and volumes by name, image or label; "
            "the best few of each kind, with counts.",
            {"query": {"type": "string", "minLength": 1, "maxLength": 200, "description": "text to search for"},
             "limit": {"type": "integer", "default": 3,
                       "description": "results per kind (0 or over 1000: 1000; negative: 3)"}},
            ("query",), False, True, ()),
    # ------------------------------------------------------------------------------------------ tier 1
    ToolDef("scale_service", "Scale a service", "Set a replicated service's number of replicas.",
            {"id": SERVICE_ID, "replicas": {"type": "integer", "minimum": 0}}, ("id", "replicas"), False, True,
            ("service", "stack"), "scale_service", ResourceKind.SERVICE,
            call=lambda a: RestCall("PUT", _svc(a["id"], "/scale"), {"replicas": a["replicas"]})),
    ToolDef("update_service_image", "Change a service's image",
            "Set the service's image; its tasks are replaced by a rolling update.",
            {"id": SERVICE_ID, "image": {"type": "string", "minLength": 1}}, ("id", "image"), True, True,
            ("service", "stack"), "update_service_image", ResourceKind.SERVICE,
            call=lambda a: RestCall("PUT", _svc(a["id"], "/image"), {"image": a["image"]})),
    ToolDef("rollback_service", "Roll a service back", "Revert the service to its previous spec.",
            {"id": SERVICE_ID}, ("id",), True, False, ("service", "stack"), "rollback_service",
            ResourceKind.SERVICE, call=lambda a: RestCall("POST", _svc(a["id"], "/rollback"))),
    ToolDef("restart_service", "Restart a service", "Replace every task of the service (a rolling restart).",
            {"id": SERVICE_ID}, ("id",), True, False, ("service", "stack"), "restart_service",
            ResourceKind.SERVICE, call=lambda a: RestCall("POST", _svc(a["id"], "/restart"))),
    ToolDef("remove_task", "Remove a task",
            "Remove a running task's container; the scheduler replaces the task. Answers {\"removed\": true}.",
            {"id": _id("task id")}, ("id",), True, False, ("task", "service", "stack"), "remove_task",
            ResourceKind.TASK, removal=True, call=lambda a: RestCall("DELETE", f"/tasks/{a['id']}")),
    # ------------------------------------------------------------------------------------------ tier 2
    _sub_tool("update_service_env", "Edit a service's environment", "env", "env",
              "Set or remove environment variables of the service (merged into the current ones).", merge=True),
    _sub_tool("update_service_labels", "Edit a service's labels", "labels", "labels",
              "Set or remove labels of the service (merged into the current ones).", merge=True),
    ToolDef("update_node_labels", "Edit a node's labels",
            "Set or remove labels of the node (merged into the current ones).",
            {"id": NODE_ID, "labels": _MERGE_MAP}, ("id", "labels"), False, True, ("node",), "patch_node_labels",
            ResourceKind.NODE,
            call=lambda a: RestCall("PATCH", f"/nodes/{a['id']}/labels", a["labels"], MERGE_PATCH)),
    _sub_tool("update_service_resources", "Set a service's resources", "resources", "resources",
              "Replace the service's resource limits and reservations (omitted fields are cleared)."),
    _sub_tool("update_service_placement", "Set a service's placement", "placement", "placement",
              "Replace the service's placement (constraints, preferences, max replicas per node, platforms).",
              destructive=True),
    _sub_tool("update_service_ports", "Set a service's published ports", "ports", "ports",
              "Replace the service's published ports.", destructive=True),
    _sub_tool("update_service_update_policy", "Set a service's update policy", "update-policy", "policy",
              "Replace the service's update policy (durations in nanoseconds)."),
    _sub_tool("update_service_rollback_policy", "Set a service's rollback policy", "rollback-policy", "policy",
              "Replace the service's rollback policy (durations in nanoseconds)."),
    _sub_tool("update_service_log_driver", "Set a service's log driver", "log-driver", "driver",
              "Replace the service's log driver ({Name, Options})."),
    # ------------------------------------------------------------------------------------------ tier 3
    ToolDef("update_node_availability", "Set a node's availability",
            "active, pause (no new tasks) or drain (its tasks move to other nodes).",
            {"id": NODE_ID, "availability": {"enum": ["active", "pause", "drain"]}}, ("id", "availability"),
            True, True, ("node",), "update_node_availability", ResourceKind.NODE,
            call=lambda a: RestCall("PUT", f"/nodes/{a['id']}/availability", {"availability": a["availability"]})),
    ToolDef("update_node_role", "Promote or demote a node", "Make the node a worker or a manager.",
            {"id": NODE_ID, "role": {"enum": ["worker", "manager"]}}, ("id", "role"), True, True, ("node",),
            "update_node_role", ResourceKind.NODE,
            call=lambda a: RestCall("PUT", f"/nodes/{a['id']}/role", {"role": a["role"]})),
    _remove(ResourceKind.SERVICE, "Remove a service", ("service", "stack")),
    _remove(ResourceKind.CONFIG, "Remove a config", ("config", "stack")),
    _remove(ResourceKind.SECRET, "Remove a secret", ("secret", "stack")),
    _remove(ResourceKind.NETWORK, "Remove a network", ("network", "stack")),
    _remove(ResourceKind.VOLUME, "Remove a volume", ("volume", "stack"), force=True),
)

BY_NAME: dict[str, ToolDef] = {tool.name: tool for tool in TOOLS}
assert len(BY_NAME) == len(TOOLS) == 23, "23 distinct tools"
for _tool in TOOLS:
    _rows = [row for row in OPERATIONS.values() if row.tool == _tool.name]
    assert (_tool.operation is None) == (not _rows), f"{_tool.name}: a write tool has rows, a read tool none"
    assert {row.tier for row in _rows} <= {_tool.tier}, f"{_tool.name}: its rows disagree on the tier"
    assert _tool.row is None or _tool.row.tool == _tool.name, f"{_tool.name} runs a row of another tool"


def tool(name: str) -> ToolDef | None:
    return BY_NAME.get(name)
