"""Dry runs of writes (``?dryRun=true``, the agent tools' ``dryRun: true``): every check, no engine write.

A dry run goes through the same view as the write: the operations level, the ACL, the target (404),
``If-Match``, the body, the bounds and the reserved labels are all checked as for the write; where the write
would call the engine, the view answers 200 with what would change instead (docs/writes.md, Dry runs).
Nothing is sent to the engine, no audit is announced, nothing reaches the history, and an
``Idempotency-Key`` is neither claimed nor recorded.

Which writes have a dry run is listed in :data:`SUPPORTED`; any other write asked for one is refused with
400 ``API022`` before its body is read, so no write can run for real when a dry run was asked. As a second
guard, ``app.http.writes.engine_write`` refuses to call the engine inside a dry run.

The answer (``@type: WriteDryRun``)::

    {"dryRun": true, "operation": "scale_service", "action": "update" | "remove" | "create" | "none",
     "target": {"type", "id"?, "name"?, "@id"?}, "summary": "replicas 2→3",
     "changes": [{field, old?, new?}], "changesOmitted"?: n,   # updates: the history entry's diff format
     "removes": [{type, id, name, @id}],                       # removals (a stack: every member)
     "creates": {"type", "spec"}}                              # creates: the spec sent to the engine
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from flask import Response, g, request

from app.acl.redact import redact_raw
from app.cache.entries import Entry
from app.errors import ProblemError
from app.history import diff, summary
from app.http import respond
from app.http.acl_read import read_filter
from app.http.jsonld import envelope
from app.query.service_insights import change_entry, spec_differences
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import OPERATIONS, SERVICE_SUBRESOURCES, Operation

PARAMETER = "dryRun"
JSONLD_TYPE = "WriteDryRun"
Data = dict[str, Any]

_UPDATES = {"scale_service", "update_service_image", "rollback_service", "restart_service", "set_service_mode",
            "set_service_endpoint_mode", "update_node_availability", "update_node_role",
            "put_node_labels", "patch_node_labels", "put_config_labels", "patch_config_labels",
            "put_secret_labels", "patch_secret_labels",
            *(f"{method}_service_{sub.replace('-', '_')}" for sub in SERVICE_SUBRESOURCES
              for method in ("put", "patch"))}
_REMOVALS = {"remove_service", "remove_node", "remove_task", "remove_stack", "remove_config", "remove_secret",
             "remove_network", "remove_volume"}
_CREATES = {"create_config", "create_secret", "create_network", "create_volume"}
_SWARM = {"update_swarm_orchestration", "update_swarm_raft", "update_swarm_dispatcher", "update_swarm_ca",
          "update_swarm_encryption"}
_PLUGINS = {"enable_plugin", "disable_plugin", "remove_plugin", "update_plugin_settings"}
# The writes with a dry run; every other one refuses ``dryRun=true`` with 400 API022.
SUPPORTED: frozenset[str] = frozenset(_UPDATES | _REMOVALS | _CREATES | _SWARM | _PLUGINS)
assert set(OPERATIONS) >= SUPPORTED, "dry-run names must be operations"


def requested() -> bool:
    """``?dryRun=true`` (or ``1``); ``false``/``0``/absent is a real write; any other value 400 ``API012``."""
    value = request.args.get(PARAMETER)
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0", ""):
        return False
    raise ProblemError("API012", detail=f"{PARAMETER} must be true or false, not {value[:40]!r}.")


def check_supported(op: Operation) -> None:
    if op.name not in SUPPORTED:
        raise ProblemError("API022", detail=f"{op.name} has no dry run; nothing was checked or written. "
                                            f"Send it without {PARAMETER} to perform it.")


def active() -> bool:
    """Whether the current write is a dry run (set by ``app.http.writes.begin``)."""
    return bool(g.get("dry_run"))


# ---------------------------------------------------------------------------------------------- answers
def _object_ref(kind: ResourceKind, entry: Entry) -> Data:
    return {"type": kind.value, "id": entry.id, "name": entry.name,
            "@id": respond.base_path() + f"{kind.spec.path}/{entry.id}"}


def _answer(op: Operation, action: str, target: Data, text: str, members: Data) -> Response:
    body = envelope(respond.base_path(), request.path, JSONLD_TYPE)
    body.update({"dryRun": True, "operation": op.name, "action": action, "target": target, "summary": text})
    body.update(members)
    return respond.document(body, cache_control="no-store")


def _shown(kind: ResourceKind, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The state as this caller may see it: a secret's data never, references it may not read redacted."""
    if kind is ResourceKind.SECRET and isinstance(raw.get("Spec"), Mapping):
        spec = {key: value for key, value in raw["Spec"].items() if key != "Data"}
        raw = {**raw, "Spec": spec}
    visible = read_filter()
    if visible is None or not isinstance(raw, dict):
        return raw
    return redact_raw(kind, raw, current_runtime().cache, visible)[0]


def update(op: Operation, entry: Entry, new_spec: Mapping[str, Any], *, rollback: bool = False) -> Response:
    """A versioned update: the field diff between the current object and the object with ``new_spec``
    (a rollback: with its previous spec), as the history entry of the change would show it."""
    kind = entry.kind
    if rollback:
        new_spec = entry.raw.get("PreviousSpec") or {}
    after = {**entry.raw, "Spec": copy.deepcopy(dict(new_spec))}
    found = diff.differences(kind, _shown(kind, entry.raw), _shown(kind, after))
    text = summary.update_summary(kind, found) if found else "no change"
    return _answer(op, "update", _object_ref(kind, entry), text, diff.change_list(found))


def removal(op: Operation, target: Entry, members: Sequence[Entry] | None = None, *, note: str | None = None
            ) -> Response:
    """A removal: the object (a stack: its members, in removal order) that would be removed."""
    gone = list(members) if members is not None else [target]
    removes = [_object_ref(entry.kind, entry) for entry in gone]
    text = f"would remove {target.kind.value} {target.name}" + (f" ({len(gone)} members)" if members is not None
                                                                  else "")
    extra: Data = {"removes": removes}
    if note:
        extra["note"] = note
    return _answer(op, "remove", _object_ref(target.kind, target), text, extra)


def create(op: Operation, kind: ResourceKind, spec: Mapping[str, Any]) -> Response:
    """A create: the spec that would be sent to the engine (a secret's data left out)."""
    shown = {key: value for key, value in spec.items() if not (kind is ResourceKind.SECRET and key == "Data")}
    name = str(spec.get("Name") or "")
    target = {"type": kind.value, "name": name}
    return _answer(op, "create", target, f"would create {kind.value} {name}",
                   {"creates": {"type": kind.value, "spec": shown}})


def unchanged(op: Operation, kind: ResourceKind, entry: Entry | None, name: str, text: str) -> Response:
    """Nothing would change (a volume create whose name exists: the existing one is answered)."""
    target = _object_ref(kind, entry) if entry is not None else {"type": kind.value, "name": name}
    return _answer(op, "none", target, text, {"changes": []})


def plugin(op: Operation, found: Mapping[str, Any], path: str, changes: Sequence[tuple[str, Any, Any]], *,
           removal: bool = False) -> Response:
    """A plugin write: ``changes`` as (field, old, new) of the engine's plugin object, or its removal."""
    name = str(found.get("Name") or "")
    target = {"type": "plugin", "id": str(found.get("Id") or name), "name": name, "@id": respond.base_path() + path}
    if removal:
        return _answer(op, "remove", target, f"would remove plugin {name}", {"removes": [target]})
    shown = [change_entry(tuple(field.split(".")), old, new) for field, old, new in changes if old != new]
    text = ", ".join(f"{entry['field']} → {entry.get('new')}" for entry in shown) or "no change"
    return _answer(op, "update" if shown else "none", target, text, {"changes": shown})


def swarm_update(op: Operation, current: Mapping[str, Any], new: Mapping[str, Any]) -> Response:
    """A swarm settings patch: the differences of ``Spec`` (paths from the swarm object's root)."""
    found = [(("Spec", *path), old, value) for path, old, value in spec_differences(current, new)]
    members: Data = {"changes": [change_entry(path, old, value) for path, old, value in found]}
    text = ", ".join(entry["field"] for entry in members["changes"][:5]) or "no change"
    target = {"type": "swarm", "id": "cluster", "@id": respond.base_path() + "/swarm"}
    return _answer(op, "update" if found else "none", target, text, members)


# ---------------------------------------------------------------------------------------------- API document
_REF = {"type": "object", "properties": {"type": {"type": "string"}, "id": {"type": "string"},
                                         "name": {"type": "string"}, "@id": {"type": "string"}}}
SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["@type", "dryRun", "operation", "action", "target", "summary"],
    "description": "The answer of a dry run (dryRun=true): what the write would change; nothing was written.",
    "properties": {
        "@context": {"type": "string"}, "@id": {"type": "string"}, "@type": {"const": JSONLD_TYPE},
        "dryRun": {"const": True}, "operation": {"type": "string", "description": "the write's operation name"},
        "action": {"enum": ["update", "remove", "create", "none"]}, "target": _REF,
        "summary": {"type": "string", "description": "as the history entry of the change would say it"},
        "changes": {"type": "array", "description": "updates: field-level differences (the history entry's "
                                                    "format: {field, old?, new?, abridged?})",
                    "items": {"type": "object", "required": ["field"], "properties": {
                        "field": {"type": "string"}, "old": {}, "new": {}, "abridged": {"type": "boolean"}}}},
        "changesOmitted": {"type": "integer"},
        "removes": {"type": "array", "items": _REF, "description": "removals: what would be removed"},
        "creates": {"type": "object", "description": "creates: the spec that would be sent to the engine",
                    "properties": {"type": {"type": "string"}, "spec": {"type": "object"}}},
        "note": {"type": "string"}}}
PARAMETER_DOC: dict[str, Any] = {
    "in": "query", "name": PARAMETER, "required": False, "schema": {"type": "string", "enum": ["true", "false"]},
    "description": "true: run every check of the write and answer 200 with what would change (WriteDryRun); "
                   "nothing is written, audited or recorded."}
