"""``/stacks/summary``: one row per stack with member counts, desired tasks, task states, updates in
progress and the resource limits its services declare.

``memoryLimitBytes``/``cpuLimitCores`` are limit times desired tasks summed over the stack's services (a
service without a limit adds nothing). ``memoryUsageBytes``/``cpuUsagePercent`` would come from Prometheus
and are null here (not wired). ``tasksByState`` counts every cached task of the member services, history
included, as ``/cluster`` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from app.cache.entries import Entry
from app.cache.store import Cache
from app.cluster.services import NANO, desired_tasks, is_updating, limits
from app.cooperate import pause
from app.resources import ResourceKind

PART = 5_000   # tasks between two loop turns
_MEMBERS = (("serviceCount", "services"), ("configCount", "configs"), ("secretCount", "secrets"),
            ("networkCount", "networks"), ("volumeCount", "volumes"))


def _summary(cache: Cache, stack: Entry, budget: list[int]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": stack.name}
    for key, member in _MEMBERS:
        row[key] = len(stack.raw.get(member) or ())
    desired = updating = memory_limit = cpu_limit = 0
    states: Counter[str] = Counter()
    for service in cache.stack_members(stack.name, ResourceKind.SERVICE):
        replicas = desired_tasks(cache, service)
        desired += replicas
        updating += is_updating(service.raw)
        cpus, memory = limits(service.raw)
        cpu_limit += cpus * replicas
        memory_limit += memory * replicas
        for task_id in cache.task_ids_of_service(service.id):
            task = cache.get(ResourceKind.TASK, task_id)
            if task is not None:
                states[str(task.activation["state"])] += 1
        budget[0] -= len(cache.task_ids_of_service(service.id))
        if budget[0] <= 0:
            budget[0] = PART
            pause()
    row.update(desiredTasks=desired, tasksByState=dict(sorted(states.items())), updatingServices=updating,
               memoryLimitBytes=memory_limit, cpuLimitCores=round(cpu_limit / NANO, 3),
               memoryUsageBytes=None, cpuUsagePercent=None)
    return row


def summaries(cache: Cache, readable: Callable[[Entry], bool] | None = None) -> list[dict[str, Any]]:
    """Every stack (that ``readable`` keeps: the ACL), by name."""
    budget = [PART]
    return [_summary(cache, stack, budget) for stack in cache.sorted_entries(ResourceKind.STACK, "name")
            if readable is None or readable(stack)]
