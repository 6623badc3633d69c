"""``/cluster/capacity``: what the nodes offer, what their tasks reserve, and what is left.

The capacity members (``maxNodeCPU``, ``maxNodeMemory``, ``totalCPU``, ``totalMemory``, ``nodeCount``;
cores and bytes) plus ``reserved``/``available`` totals and a ``nodes`` list. A node's
reservation is the sum of ``Spec.Resources.Reservations`` of its tasks that hold it (desired state
``running``, state assigned through running): what the scheduler counts. ``available`` is never negative
(an over-committed node shows 0), and the total is the sum of the nodes' own. CPU in cores (3 decimals),
memory in bytes. With an ACL policy the document covers only the nodes the caller may read (``/nodes``'s
rule): rows, totals, maxima and ``nodeCount`` alike (docs/acl.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.cache.entries import Entry
from app.cache.store import Cache
from app.cluster.overview import node_totals
from app.cluster.services import HOLDING_STATES, NANO, cores, node_resources, reservation
from app.cooperate import pause
from app.resources import ResourceKind

PART = 5_000   # tasks between two loop turns


def _reserved_on(cache: Cache, node: Entry, budget: list[int]) -> tuple[int, int]:
    cpus = memory = 0
    for task_id in cache.task_ids_of_node(node.id):
        budget[0] -= 1
        if budget[0] <= 0:
            budget[0] = PART
            pause()
        task = cache.get(ResourceKind.TASK, task_id)
        if task is None or task.activation["desired_state"] != "running" \
                or task.activation["state"] not in HOLDING_STATES:
            continue
        task_cpus, task_memory = reservation(task.raw)
        cpus += task_cpus
        memory += task_memory
    return cpus, memory


def _resource(total: int, reserved: int, *, cpu: bool) -> dict[str, Any]:
    available = max(0, total - reserved)
    if cpu:
        return {"total": cores(total), "reserved": cores(reserved), "available": cores(available)}
    return {"total": total, "reserved": reserved, "available": available}


def capacity(cache: Cache, visible: Callable[[Entry], bool] | None = None) -> dict[str, Any]:
    """The capacity document over the nodes the caller may read (``visible``, the ``/nodes`` rule; None:
    every node): rows and totals alike, so a restricted reader never learns a hidden node's id, hostname
    or size. A visible node's reservation counts every task holding it, whatever service it belongs to."""
    nodes = sorted((node for node in cache.entries(ResourceKind.NODE) if visible is None or visible(node)),
                   key=lambda entry: (entry.name, entry.id))
    totals = node_totals(nodes)
    budget = [PART]
    rows: list[dict[str, Any]] = []
    reserved_cpu = reserved_memory = available_cpu = available_memory = 0
    for node in nodes:
        total_cpu, total_memory = node_resources(node.raw)
        cpus, memory = _reserved_on(cache, node, budget)
        reserved_cpu += cpus
        reserved_memory += memory
        available_cpu += max(0, total_cpu - cpus)
        available_memory += max(0, total_memory - memory)
        rows.append({"id": node.id, "hostname": node.name, "state": node.activation["state"],
                     "availability": node.activation["availability"],
                     "cpu": _resource(total_cpu, cpus, cpu=True),
                     "memory": _resource(total_memory, memory, cpu=False)})
    return {
        "maxNodeCPU": totals.max_nano_cpus // NANO, "maxNodeMemory": totals.max_memory,
        "totalCPU": totals.nano_cpus // NANO, "totalMemory": totals.memory, "nodeCount": totals.count,
        "reserved": {"cpu": cores(reserved_cpu), "memory": reserved_memory},
        "available": {"cpu": cores(available_cpu), "memory": available_memory},
        "nodes": rows,
    }
