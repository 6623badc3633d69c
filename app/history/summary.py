"""The one-line summary of a change: "replicas 2→3, image a→b", "created: image busybox, replicas 2".

Updates are summarised from their differences (``app.history.diff``): well-known members get short labels
and come first, in the order of ``_LABELS``; anything else is shown by its path. At most ``MAX_PHRASES``
phrases, then "and N more"; values are cut to ``MAX_VALUE`` characters, image digests dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.cache.entries import dig
from app.history.diff import Difference, Path
from app.query.service_insights import ABSENT, render_path
from app.resources import ResourceKind

MAX_PHRASES = 3
MAX_VALUE = 40

# Short labels, in the order they are reported.
_LABELS: dict[Path, str] = {
    ("Spec", "Mode", "Replicated", "Replicas"): "replicas",
    ("Spec", "TaskTemplate", "ContainerSpec", "Image"): "image",
    ("Status", "State"): "state",
    ("DesiredState",): "desired state",
    ("Spec", "Availability"): "availability",
    ("Spec", "Role"): "role",
    ("ManagerStatus", "Reachability"): "reachability",
    ("ManagerStatus", "Leader"): "leader",
    ("UpdateStatus", "State"): "update",
    ("Status", "Err"): "error",
    ("Status", "ContainerStatus", "ExitCode"): "exit code",
    ("NodeID",): "node",
    ("Spec", "TaskTemplate", "ForceUpdate"): "force update",
    ("Spec", "Mode"): "mode",
}
_ORDER = {path: index for index, path in enumerate(_LABELS)}
# Prefixes of user maps whose keys are shown after a short label.
_MAP_LABELS: tuple[tuple[Path, str], ...] = (
    (("Spec", "TaskTemplate", "ContainerSpec", "Env"), "env"),
    (("Spec", "TaskTemplate", "ContainerSpec", "Labels"), "container label"),
    (("Spec", "Labels"), "label"),
    (("Labels",), "label"),
)
_IMAGES = frozenset({("Spec", "TaskTemplate", "ContainerSpec", "Image"), ("Spec", "ContainerSpec", "Image")})
_RELATED = {
    ResourceKind.SERVICE: "tasks or referenced objects", ResourceKind.NODE: "tasks",
    ResourceKind.TASK: "service or node", ResourceKind.STACK: "members",
}


def update_summary(kind: ResourceKind, found: list[Difference]) -> str:
    if not found:
        return "updated (no tracked field changed)"
    ranked = sorted(found, key=lambda d: (_ORDER.get(d[0], len(_ORDER)), d[0]))
    phrases = [_phrase(kind, *difference) for difference in ranked[:MAX_PHRASES]]
    if len(found) > MAX_PHRASES:
        phrases.append(f"and {len(found) - MAX_PHRASES} more")
    return ", ".join(phrases)


def create_summary(kind: ResourceKind, raw: Mapping[str, Any] | None) -> str:
    details = _facts(kind, raw or {})
    return "created" + (": " + ", ".join(details) if details else "")


def remove_summary(kind: ResourceKind, raw: Mapping[str, Any] | None) -> str:
    if kind is ResourceKind.TASK and raw is not None:
        state = dig(raw, "Status", "State")
        if isinstance(state, str) and state:
            return f"removed (last state {state})"
    return "removed"


def related_summary(kind: ResourceKind) -> str:
    return "related change: " + _RELATED.get(kind, "services using it")


def _facts(kind: ResourceKind, raw: Mapping[str, Any]) -> list[str]:
    if kind is ResourceKind.SERVICE:
        facts = []
        image = dig(raw, "Spec", "TaskTemplate", "ContainerSpec", "Image")
        if isinstance(image, str):
            facts.append("image " + _short(_without_digest(image)))
        replicas = dig(raw, "Spec", "Mode", "Replicated", "Replicas")
        if isinstance(replicas, int):
            facts.append(f"replicas {replicas}")
        elif isinstance(dig(raw, "Spec", "Mode"), Mapping) and "Global" in raw["Spec"]["Mode"]:
            facts.append("global")
        return facts
    if kind is ResourceKind.TASK:
        state = dig(raw, "Status", "State")
        return [f"state {state}"] if isinstance(state, str) and state else []
    if kind is ResourceKind.NODE:
        role = dig(raw, "Spec", "Role")
        return [f"role {role}"] if isinstance(role, str) and role else []
    return []


def _phrase(kind: ResourceKind, path: Path, old: Any, new: Any) -> str:
    label = _label(kind, path)
    if path in _IMAGES:
        old, new = (_without_digest(v) if isinstance(v, str) else v for v in (old, new))
        if old == new:
            return f"{label} digest changed"
    if old is ABSENT:
        return f"{label} set to {_value(new)}"
    if new is ABSENT:
        return f"{label} removed"
    if kind is ResourceKind.STACK and isinstance(old, list) and isinstance(new, list):
        return f"{label} {len(old)}→{len(new)}"
    return f"{label} {_value(old)}→{_value(new)}"


def _label(kind: ResourceKind, path: Path) -> str:
    if path in _LABELS:
        return _LABELS[path]
    for prefix, label in _MAP_LABELS:
        if len(path) == len(prefix) + 1 and path[:-1] == prefix:
            return f"{label} {path[-1]}"
    shown = path[1:] if path[:1] == ("Spec",) and len(path) > 1 else path
    return render_path(shown)


def _value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return _short(text)


def _short(text: str) -> str:
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def _without_digest(image: str) -> str:
    return image.split("@", 1)[0]

