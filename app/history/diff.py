"""Field-level differences between the before and after objects of a change record.

What is compared is a per-kind projection of the engine object: its ``Spec`` (with the engine-default
rules of ``app.query.service_insights``, which also diffs a service's PreviousSpec), plus the few status
members a reader cares about (a task's state, a node's availability and reachability). Volatile members
(``Version``, ``UpdatedAt``, timestamps, a network's attached containers) are left out, so an update that
only bumps a version has no differences. Paths are from the object root in the engine's names
(``Spec.Mode.Replicated.Replicas``, ``Status.State``), map keys in brackets (``Spec.Labels["tier"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.query.service_insights import ABSENT, MAX_CHANGES, change_entry, spec_differences
from app.resources import ResourceKind

Path = tuple[str, ...]
Difference = tuple[Path, Any, Any]   # (path from the object root, old or ABSENT, new or ABSENT)
Data = dict[str, Any]

_SPEC: Path = ("Spec",)
# Members compared besides Spec, as paths from the object root.
_TRACKED: dict[ResourceKind, tuple[Path, ...]] = {
    ResourceKind.NODE: (("Status", "State"), ("Status", "Message"), ("Status", "Addr"),
                        ("ManagerStatus", "Leader"), ("ManagerStatus", "Reachability"),
                        ("Description", "Hostname"), ("Description", "Engine", "EngineVersion")),
    ResourceKind.SERVICE: (("UpdateStatus", "State"), ("UpdateStatus", "Message")),
    ResourceKind.TASK: (("Status", "State"), ("Status", "Message"), ("Status", "Err"),
                        ("Status", "ContainerStatus", "ExitCode"), ("DesiredState",), ("NodeID",)),
    ResourceKind.CONFIG: (),
    ResourceKind.SECRET: (),
    ResourceKind.NETWORK: tuple((name,) for name in (
        "Name", "Driver", "Scope", "Internal", "Attachable", "Ingress", "EnableIPv6", "IPAM", "Options",
        "Labels", "ConfigFrom", "ConfigOnly")),
    ResourceKind.VOLUME: tuple((name,) for name in ("Name", "Driver", "Scope", "Labels", "Options",
                                                    "ClusterVolume")),
    ResourceKind.STACK: tuple((name,) for name in ("services", "configs", "secrets", "networks", "volumes")),
}
_HAS_SPEC = frozenset({ResourceKind.NODE, ResourceKind.SERVICE, ResourceKind.TASK, ResourceKind.CONFIG,
                       ResourceKind.SECRET})


def differences(kind: ResourceKind, before: Mapping[str, Any] | None,
                after: Mapping[str, Any] | None) -> list[Difference]:
    """Every difference between two states of one object, sorted by path; empty unless both exist."""
    if before is None or after is None:
        return []
    found: list[Difference] = []
    if kind in _HAS_SPEC:
        old_spec, new_spec = before.get("Spec"), after.get("Spec")
        found += [(_SPEC + path, old, new) for path, old, new in
                  spec_differences(old_spec if isinstance(old_spec, Mapping) else {},
                                   new_spec if isinstance(new_spec, Mapping) else {})]
    tracked = _TRACKED[kind]
    if tracked:
        found += spec_differences(_project(before, tracked), _project(after, tracked))
    found.sort(key=lambda difference: difference[0])
    return found


def _project(raw: Mapping[str, Any], paths: tuple[Path, ...]) -> Data:
    """The members at ``paths`` as a nested dict (absent members stay absent)."""
    projected: Data = {}
    for path in paths:
        value: Any = raw
        for key in path:
            value = value.get(key, ABSENT) if isinstance(value, Mapping) else ABSENT
        if value is ABSENT:
            continue
        target = projected
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return projected


def change_list(found: list[Difference]) -> Data:
    """``changes`` (at most ``MAX_CHANGES``, as the service detail's) and ``changesOmitted`` beyond."""
    members: Data = {"changes": [change_entry(path, old, new) for path, old, new in found[:MAX_CHANGES]]}
    if len(found) > MAX_CHANGES:
        members["changesOmitted"] = len(found) - MAX_CHANGES
    return members
