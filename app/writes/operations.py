"""The table of write operations: one row per (URL rule, method), with its tier, target and body kind.

Why one table: the operations level is enforced from it (403 ``OPS001``), and ``Allow`` / ``Accept-Patch``
on GET and HEAD are computed from it (``app.http.allow``), so what a response advertises is exactly what a
write would be let through. Rules are werkzeug rule strings as the blueprints declare them
(``/services/<id>/scale``); the agent tools (MCP) will name the same rows by ``tool``.

Choice: a write has the same tier as the agent tool with the same effect (node labels tier 2, remove task
tier 1), even where a plain HTTP tiering would say 3; writes no tool covers take their HTTP tier
(docs/writes.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
BOTH_PATCHES = (JSON_PATCH, MERGE_PATCH)


class Tier(IntEnum):
    READ = 0
    OPERATIONAL = 1
    CONFIGURATION = 2
    IMPACTFUL = 3


TIER_NAMES = {Tier.READ: "read-only", Tier.OPERATIONAL: "operational", Tier.CONFIGURATION: "configuration",
              Tier.IMPACTFUL: "impactful"}


@dataclass(frozen=True, slots=True)
class Operation:
    name: str                 # stable id, also used in logs and audit
    method: str               # PUT, POST, PATCH, DELETE
    rule: str                 # werkzeug rule, as registered
    tier: Tier
    target: str               # ACL resource type: service, node, task, config, secret, network, volume,
    #                           stack, plugin, swarm
    patch_types: tuple[str, ...] = ()    # PATCH: accepted Content-Types (anything else: 415 API004)
    tool: str | None = None              # the agent tool with the same effect, if any
    create: bool = False                 # a create (201 + Location; ACL write on "<type>:*")


_ROWS: list[Operation] = []


def _op(name: str, method: str, rule: str, tier: Tier, target: str, *, patch: tuple[str, ...] = (),
        tool: str | None = None, create: bool = False) -> None:
    _ROWS.append(Operation(name, method, rule, tier, target, patch, tool, create))


T1, T2, T3 = Tier.OPERATIONAL, Tier.CONFIGURATION, Tier.IMPACTFUL
SVC = "/services/<id>"

# ---------------------------------------------------------------------------------------------- services
_op("scale_service", "PUT", f"{SVC}/scale", T1, "service", tool="scale_service")
_op("update_service_image", "PUT", f"{SVC}/image", T1, "service", tool="update_service_image")
_op("rollback_service", "POST", f"{SVC}/rollback", T1, "service", tool="rollback_service")
_op("restart_service", "POST", f"{SVC}/restart", T1, "service", tool="restart_service")
_op("set_service_mode", "PUT", f"{SVC}/mode", T3, "service")
_op("set_service_endpoint_mode", "PUT", f"{SVC}/endpoint-mode", T3, "service")
_op("remove_service", "DELETE", SVC, T3, "service", tool="remove_service")

# Sub-resources of a service's spec: PUT of the whole value, PATCH with either patch type.
SERVICE_SUBRESOURCES: dict[str, tuple[Tier, str | None]] = {
    "env": (T2, "update_service_env"),
    "labels": (T2, "update_service_labels"),
    "resources": (T2, "update_service_resources"),
    "placement": (T2, "update_service_placement"),
    "ports": (T2, "update_service_ports"),
    "update-policy": (T2, "update_service_update_policy"),
    "rollback-policy": (T2, "update_service_rollback_policy"),
    "log-driver": (T2, "update_service_log_driver"),
    "healthcheck": (T2, None),
    "container-config": (T2, None),
    "configs": (T2, None),
    "secrets": (T2, None),
    "networks": (T2, None),
    "mounts": (T2, None),
}
for _sub, (_tier, _tool) in SERVICE_SUBRESOURCES.items():
    _snake = _sub.replace("-", "_")
    _op(f"put_service_{_snake}", "PUT", f"{SVC}/{_sub}", _tier, "service", tool=_tool)
    _op(f"patch_service_{_snake}", "PATCH", f"{SVC}/{_sub}", _tier, "service", patch=BOTH_PATCHES, tool=_tool)

# ---------------------------------------------------------------------------------------------- nodes
NODE = "/nodes/<id>"
_op("update_node_availability", "PUT", f"{NODE}/availability", T3, "node", tool="update_node_availability")
_op("update_node_role", "PUT", f"{NODE}/role", T3, "node", tool="update_node_role")
_op("put_node_labels", "PUT", f"{NODE}/labels", T2, "node", tool="update_node_labels")
_op("patch_node_labels", "PATCH", f"{NODE}/labels", T2, "node", patch=BOTH_PATCHES, tool="update_node_labels")
_op("remove_node", "DELETE", NODE, T3, "node")

# ---------------------------------------------------------------------------------------------- others
_op("remove_task", "DELETE", "/tasks/<id>", T1, "task", tool="remove_task")
_op("remove_stack", "DELETE", "/stacks/<name>", T3, "stack")
for _kind, _plural in (("config", "configs"), ("secret", "secrets")):
    _op(f"create_{_kind}", "POST", f"/{_plural}", T2, _kind, create=True)
    _op(f"put_{_kind}_labels", "PUT", f"/{_plural}/<id>/labels", T2, _kind)
    _op(f"patch_{_kind}_labels", "PATCH", f"/{_plural}/<id>/labels", T2, _kind, patch=BOTH_PATCHES)
    _op(f"remove_{_kind}", "DELETE", f"/{_plural}/<id>", T3, _kind, tool=f"remove_{_kind}")
_op("create_network", "POST", "/networks", T2, "network", create=True)
_op("remove_network", "DELETE", "/networks/<id>", T3, "network", tool="remove_network")
_op("create_volume", "POST", "/volumes", T2, "volume", create=True)
_op("remove_volume", "DELETE", "/volumes/<name>", T3, "volume", tool="remove_volume")

# ---------------------------------------------------------------------------------------------- swarm
_op("update_swarm_orchestration", "PATCH", "/swarm/orchestration", T2, "swarm", patch=(MERGE_PATCH,))
_op("update_swarm_raft", "PATCH", "/swarm/raft", T2, "swarm", patch=(MERGE_PATCH,))
_op("update_swarm_dispatcher", "PATCH", "/swarm/dispatcher", T2, "swarm", patch=(MERGE_PATCH,))
_op("update_swarm_ca", "PATCH", "/swarm/ca", T3, "swarm", patch=(MERGE_PATCH,))
_op("update_swarm_encryption", "PATCH", "/swarm/encryption", T3, "swarm", patch=(MERGE_PATCH,))
_op("rotate_swarm_token", "POST", "/swarm/rotate-token", T3, "swarm")
_op("rotate_swarm_unlock_key", "POST", "/swarm/rotate-unlock-key", T3, "swarm")
_op("force_rotate_swarm_ca", "POST", "/swarm/force-rotate-ca", T3, "swarm")
_op("unlock_swarm", "POST", "/swarm/unlock", T3, "swarm")
_op("read_swarm_unlock_key", "GET", "/swarm/unlock-key", T3, "swarm")   # a read gated as a tier-3 write

# ---------------------------------------------------------------------------------------------- plugins
PLUGIN = "/plugins/<name>"
_op("plugin_privileges", "POST", "/plugins/privileges", T3, "plugin")
_op("install_plugin", "POST", "/plugins", T3, "plugin", create=True)
_op("upgrade_plugin", "POST", f"{PLUGIN}/upgrade", T3, "plugin")
_op("enable_plugin", "POST", f"{PLUGIN}/enable", T2, "plugin")
_op("disable_plugin", "POST", f"{PLUGIN}/disable", T2, "plugin")
_op("update_plugin_settings", "PATCH", f"{PLUGIN}/settings", T2, "plugin", patch=(MERGE_PATCH,))
_op("remove_plugin", "DELETE", PLUGIN, T3, "plugin")

OPERATIONS: dict[str, Operation] = {row.name: row for row in _ROWS}
_BY_RULE: dict[str, list[Operation]] = {}
for _row in _ROWS:
    _BY_RULE.setdefault(_row.rule, []).append(_row)
assert len(OPERATIONS) == len(_ROWS), "operation names must be unique"
assert len({(r.rule, r.method) for r in _ROWS}) == len(_ROWS), "one operation per rule and method"

METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def operation(name: str) -> Operation:
    return OPERATIONS[name]


_CONVERTER = re.compile(r"<[^:<>]+:([^<>]+)>")


def plain_rule(rule: str) -> str:
    """``rule`` without converter names (``/stacks/<stack:name>`` → ``/stacks/<name>``): the table's form."""
    return _CONVERTER.sub(r"<\1>", rule) if ":" in rule else rule


def on_rule(rule: str) -> list[Operation]:
    """The write operations of one URL rule (empty for read-only URLs); a converter in the rule
    (``/stacks/<stack:name>``) does not change which row it is."""
    rows = _BY_RULE.get(rule)
    return rows if rows is not None else _BY_RULE.get(plain_rule(rule), [])


def permitted(operations: Iterable[Operation], level: int) -> list[Operation]:
    return [op for op in operations if op.tier <= level and op.method != "GET"]


def tier_refusal(op: Operation, level: int) -> str | None:
    """Why ``op`` is refused at ``level`` (the OPS001 detail), or None when the level allows it."""
    if op.tier <= level:
        return None
    return (f"{op.method} on this resource needs operations level {int(op.tier)} ({TIER_NAMES[op.tier]}); "
            f"the configured level is {level} ({TIER_NAMES[Tier(level)]}).")
