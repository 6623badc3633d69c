"""Turn one Docker event message into what the watcher must refresh.

Engine 20.10 emits no task events: the only per-task signal is a container event carrying the swarm task
labels, and task states on other nodes are seen only by listing. So besides the object to re-inspect, an
event says whether the task list should be reconciled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.resources import ResourceKind

_OBJECT_TYPES = {
    "node": ResourceKind.NODE, "service": ResourceKind.SERVICE, "config": ResourceKind.CONFIG,
    "secret": ResourceKind.SECRET, "network": ResourceKind.NETWORK, "volume": ResourceKind.VOLUME,
}
# Container actions that never change a task (healthchecks alone emit several exec events per probe).
_NOISE_PREFIXES = ("exec_", "health_status", "top", "attach", "resize", "archive-path", "export", "commit")
_TASK_LABEL = "com.docker.swarm.task.id"


@dataclass(frozen=True, slots=True)
class Refresh:
    target: tuple[ResourceKind, str] | None   # object to re-inspect
    tasks: bool                               # reconcile the task list soon


NOTHING = Refresh(None, False)


def interpret(message: Mapping[str, Any]) -> Refresh:
    event_type = str(message.get("Type") or "")
    action = str(message.get("Action") or "")
    actor = message.get("Actor") or {}
    actor_id = str(actor.get("ID") or "")
    if event_type in _OBJECT_TYPES and actor_id:
        kind = _OBJECT_TYPES[event_type]
        return Refresh((kind, actor_id), kind in (ResourceKind.SERVICE, ResourceKind.NODE))
    if event_type == "container" and not action.startswith(_NOISE_PREFIXES):
        task_id = str((actor.get("Attributes") or {}).get(_TASK_LABEL) or "")
        return Refresh((ResourceKind.TASK, task_id) if task_id else None, bool(task_id))
    return NOTHING
