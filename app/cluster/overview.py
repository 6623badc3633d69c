"""``/cluster``: counts and health of the whole cluster (docs/topology.md), one pass per kind over the cache.

Cost grows with the cluster (10,000 tasks: see bench/bench_cluster.py); the task tally runs in parts of
``PART`` and gives the event loop a turn between two (``app.cooperate.pause``), so one request never holds
the hub for the whole walk.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from app.cache.entries import Entry
from app.cache.store import Cache
from app.cluster.services import NANO, desired_tasks, is_converged, node_resources, reservation
from app.cooperate import pause
from app.resources import ResourceKind

PART = 5_000


@dataclass(frozen=True, slots=True)
class NodeTotals:
    count: int
    ready: int
    down: int
    draining: int
    nano_cpus: int
    memory: int
    max_nano_cpus: int
    max_memory: int


def node_totals(nodes: list[Entry]) -> NodeTotals:
    ready = down = draining = nano_cpus = memory = max_cpus = max_memory = 0
    for node in nodes:
        state = node.activation["state"]
        ready += state == "ready"
        down += state == "down"
        draining += node.activation["availability"] == "drain"
        cpus, mem = node_resources(node.raw)
        nano_cpus += cpus
        memory += mem
        max_cpus, max_memory = max(max_cpus, cpus), max(max_memory, mem)
    return NodeTotals(len(nodes), ready, down, draining, nano_cpus, memory, max_cpus, max_memory)


def task_states(tasks: list[Entry]) -> dict[str, int]:
    """State → count over every cached task, in parts with a loop turn between two."""
    tally: Counter[str] = Counter()
    for start in range(0, len(tasks), PART):
        if start:
            pause()
        tally.update(str(task.activation["state"]) for task in tasks[start:start + PART])
    return dict(sorted(tally.items()))


def overview(cache: Cache, *, prometheus_configured: bool, local_node_id: str | None) -> dict[str, Any]:
    """The members of the Cluster document (without the JSON-LD envelope)."""
    nodes = node_totals(cache.entries(ResourceKind.NODE))
    services = cache.entries(ResourceKind.SERVICE)
    converged = reserved_cpu = reserved_memory = 0
    for service in services:
        converged += is_converged(cache, service)
        cpus, memory = reservation(service.raw)
        if cpus or memory:
            replicas = desired_tasks(cache, service)
            reserved_cpu += cpus * replicas
            reserved_memory += memory * replicas
    tasks = cache.entries(ResourceKind.TASK)
    body: dict[str, Any] = {
        "nodeCount": nodes.count, "serviceCount": len(services), "taskCount": len(tasks),
        "stackCount": cache.count(ResourceKind.STACK), "tasksByState": task_states(tasks),
        "nodesReady": nodes.ready, "nodesDown": nodes.down, "nodesDraining": nodes.draining,
        "servicesConverged": converged, "servicesDegraded": len(services) - converged,
        "reservedCPU": reserved_cpu, "reservedMemory": reserved_memory,
        "totalCPU": nodes.nano_cpus // NANO, "totalMemory": nodes.memory,
        "prometheusConfigured": prometheus_configured,
    }
    if local_node_id:
        body["localNodeID"] = local_node_id
    return body
