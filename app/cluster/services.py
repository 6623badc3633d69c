"""What the cluster views read from one service or task: desired replicas, resources, state.

Shared by the overview, the capacity view and the stack summaries, so "desired tasks" and "reservation"
mean the same thing everywhere. Raw engine JSON stays here (typed accessors), not in the views.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from app.cache.entries import Entry, dig, service_mode
from app.cache.store import Cache
from app.resources import ResourceKind

NANO = 1_000_000_000
# Task states in which the scheduler counts a task's reservation against its node (assigned and beyond,
# not yet finished), as ``docker node ps`` shows them holding the node.
HOLDING_STATES = frozenset({"assigned", "accepted", "preparing", "ready", "starting", "running"})


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def is_replicated(entry: Entry) -> bool:
    return service_mode(entry.raw) == "replicated"


def desired_tasks(cache: Cache, entry: Entry) -> int:
    """Replicated: the spec's replicas. Global services and jobs: the tasks the orchestrator wants
    running now (desired state ``running``), one per eligible node for a global service."""
    if is_replicated(entry):
        return _number(dig(entry.raw, "Spec", "Mode", "Replicated", "Replicas"))
    return count_desired_running(cache, cache.task_ids_of_service(entry.id))


def count_desired_running(cache: Cache, task_ids: Collection[str]) -> int:
    count = 0
    for task_id in task_ids:
        task = cache.get(ResourceKind.TASK, task_id)
        if task is not None and task.activation["desired_state"] == "running":
            count += 1
    return count


def is_converged(cache: Cache, entry: Entry) -> bool:
    """Global (and job) services count as converged; replicated ones when running ≥ desired."""
    if not is_replicated(entry):
        return True
    return cache.running_tasks(entry.id) >= desired_tasks(cache, entry)


def reservation(raw: dict[str, Any]) -> tuple[int, int]:
    """(NanoCPUs, bytes) reserved per task, from a service's or a task's Spec."""
    spec = raw.get("Spec")
    template = dig(spec, "TaskTemplate") if isinstance(spec, dict) and "TaskTemplate" in spec else spec
    reserved = dig(template or {}, "Resources", "Reservations") or {}
    return _number(reserved.get("NanoCPUs")), _number(reserved.get("MemoryBytes"))


def limits(raw: dict[str, Any]) -> tuple[int, int]:
    """(NanoCPUs, bytes) limit per task of a service."""
    limit = dig(raw, "Spec", "TaskTemplate", "Resources", "Limits") or {}
    return _number(limit.get("NanoCPUs")), _number(limit.get("MemoryBytes"))


def node_resources(raw: dict[str, Any]) -> tuple[int, int]:
    """(NanoCPUs, bytes) a node offers, from its description."""
    resources = dig(raw, "Description", "Resources") or {}
    return _number(resources.get("NanoCPUs")), _number(resources.get("MemoryBytes"))


def update_state(raw: dict[str, Any]) -> str:
    state = dig(raw, "UpdateStatus", "State")
    return state if isinstance(state, str) else ""


def is_updating(raw: dict[str, Any]) -> bool:
    return update_state(raw) in ("updating", "rollback_started")


def cores(nano_cpus: int) -> float:
    return round(nano_cpus / NANO, 3)
