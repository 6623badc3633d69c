"""The legacy flat views (``/topology/networks``, ``/topology/placement``; docs/topology.md: the same data,
flat), derived from the graphs, with plain engine ids instead of URNs.

- networks: ``nodes`` (services: ``id, name, stack, replicas, image, mode, ports, updateStatus``),
  ``edges`` (``source, target`` service ids, ``networks`` ids), ``networks`` (``id, name, driver, scope,
  services`` ids): each overlay network that joins at least two services.
- placement: ``nodes`` (swarm nodes: ``id, hostname, role, state, availability``) each with ``tasks``
  (``id, serviceId, serviceName, state, slot, image``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from app.topology.model import Graph


def plain_id(key: str) -> str:
    """``urn:service:<kind>:<id>`` → ``<id>``."""
    return key.rsplit(":", 1)[-1]


def networks_view(logical: Graph) -> dict[str, Any]:
    stack_of = {key: str(hyper.metadata.get("name")) for hyper in logical.hyperedges for key in hyper.nodes}
    nodes = [{"id": plain_id(node.key), "name": node.label, "stack": stack_of.get(node.key),
              **{k: node.metadata.get(k) for k in ("replicas", "image", "mode", "ports", "updateStatus")}}
             for node in logical.nodes]
    networks: dict[str, dict[str, Any]] = {}
    members: dict[str, set[str]] = defaultdict(set)
    edges = []
    for edge in logical.edges:
        ids = []
        for network in edge.metadata.get("networks", ()):
            network_id = plain_id(str(network["id"]))
            ids.append(network_id)
            networks.setdefault(network_id, {key: network[key] for key in ("name", "driver", "scope")})
            members[network_id].update((plain_id(edge.source), plain_id(edge.target)))
        edges.append({"source": plain_id(edge.source), "target": plain_id(edge.target), "networks": ids})
    return {"nodes": nodes, "edges": edges,
            "networks": [{"id": network_id, **networks[network_id], "services": sorted(members[network_id])}
                         for network_id in sorted(networks)]}


def placement_view(physical: Graph) -> dict[str, Any]:
    names = {node.key: node.label for node in physical.nodes}
    tasks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for hyper in physical.hyperedges:
        service_key = hyper.nodes[0]
        for task in hyper.metadata.get("tasks", ()):
            tasks[str(task["node"])].append({
                "id": plain_id(str(task["id"])), "serviceId": plain_id(service_key),
                "serviceName": names.get(service_key), "state": task["state"], "slot": task["slot"],
                "image": task["image"]})
    return {"nodes": [{"id": plain_id(node.key), "hostname": node.label,
                       **{k: node.metadata.get(k) for k in ("role", "state", "availability")},
                       "tasks": tasks.get(node.key, [])}
                      for node in physical.nodes if node.metadata.get("kind") == "node"]}

