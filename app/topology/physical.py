"""The physical graph (``placement`` / ``placement-topology``): tasks placed on nodes (docs/topology.md).

- Nodes: every swarm node ``{kind: "node", role, state, availability}`` (label: hostname) and every
  service ``{kind: "service", image}``.
- Hyperedges: one per service with placed tasks, ``{kind: "placement", tasks: [{id (URN), node (URN),
  state, slot, image}]}``; members are the service URN, then the URNs of the nodes its tasks run on (a node
  the cache no longer holds is named in its tasks but is no member).

Placed tasks are the current ones: assigned to a node, desired state other than ``shutdown`` (what
``docker service ps`` shows without the task history). ACL (``readable``, None when unrestricted): only
readable nodes and services; a readable service's tasks are readable (its keys are theirs); hyperedge
members are readable nodes only (a task still names its node's id). The task walk gives the event loop a turn every
``PART`` tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from app.cache.entries import Entry, dig, image_reference
from app.cache.store import Cache
from app.cooperate import pause
from app.resources import ResourceKind
from app.topology.model import Graph, GraphNode, HyperEdge, Metadata, urn

PART = 5_000


def _image(raw: dict[str, object], *path: str) -> str:
    image = dig(raw, *path)
    return image_reference(image) if isinstance(image, str) else ""


def is_placed(task: Entry) -> bool:
    return bool(task.activation["node"]) and task.activation["desired_state"] != "shutdown"


def _task_ref(task: Entry) -> Metadata:
    slot = task.activation["slot"]
    return {"id": urn("task", task.id), "node": urn("node", str(task.activation["node"])),
            "state": task.activation["state"], "slot": slot if slot else None,
            "image": _image(task.raw, "Spec", "ContainerSpec", "Image")}


def placed_tasks(cache: Cache) -> dict[str, list[Entry]]:
    """Service id → its placed tasks, by (slot, node, id)."""
    by_service: dict[str, list[Entry]] = defaultdict(list)
    tasks = cache.entries(ResourceKind.TASK)
    for start in range(0, len(tasks), PART):
        if start:
            pause()
        for task in tasks[start:start + PART]:
            if is_placed(task):
                by_service[str(task.activation["service"])].append(task)
    for entries in by_service.values():
        entries.sort(key=lambda t: (t.activation["slot"], t.activation["node"], t.id))
    return by_service


def physical_graph(cache: Cache, context: str, readable: Callable[[Entry], bool] | None = None) -> Graph:
    def shown(entry: Entry | None) -> bool:
        return entry is not None and (readable is None or readable(entry))

    nodes = [GraphNode(urn("node", node.id), node.name, {
        "@context": context, "kind": "node", "role": node.activation["role"], "state": node.activation["state"],
        "availability": node.activation["availability"]})
        for node in cache.sorted_entries(ResourceKind.NODE, "hostname") if shown(node)]
    services = [service for service in cache.sorted_entries(ResourceKind.SERVICE, "name") if shown(service)]
    nodes += [GraphNode(urn("service", service.id), service.name, {
        "@context": context, "kind": "service",
        "image": _image(service.raw, "Spec", "TaskTemplate", "ContainerSpec", "Image")}) for service in services]
    placed = placed_tasks(cache)
    hyperedges = []
    for service in services:
        tasks = placed.get(service.id)
        if not tasks:
            continue
        node_keys = sorted({urn("node", node_id) for node_id in (str(task.activation["node"]) for task in tasks)
                            if shown(cache.get(ResourceKind.NODE, node_id))})
        hyperedges.append(HyperEdge([urn("service", service.id), *node_keys], {
            "@context": context, "kind": "placement", "tasks": [_task_ref(task) for task in tasks]}))
    return Graph("placement", "placement-topology", "Task placement", directed=False,
                 metadata={"@context": context, "@type": "PlacementTopology"}, nodes=nodes, hyperedges=hyperedges)
