"""The logical graph (``network`` / ``network-topology``, undirected): services connected through the
overlay networks they share, grouped by stack (docs/topology.md).

- Nodes: every service, ``metadata {kind: "service", replicas, image (no digest), mode, ports
  ["published:target/protocol"], updateStatus}``.
- Edges: one per pair of services sharing at least one overlay network, listing those networks
  ``{id (URN), name, driver, scope, aliases?}``; ``aliases`` maps each endpoint's URN to its aliases on
  that network, present only when one of the two has any. The ingress network (the routing mesh, which
  every service publishing a port joins) and non-overlay networks make no edges.
- Hyperedges: one per stack ``{kind: "stack", name}`` over its services.

ACL (``readable``, None when unrestricted): only readable services are nodes; edges join readable services
only and list only readable networks (an edge left with none is dropped); a stack hyperedge needs the stack
to be readable and spans its readable services.

A network shared by n services makes n(n-1)/2 edges; the pair loop gives the event loop a turn every
``PART`` pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from app.cache.entries import Entry, dig, image_reference, service_mode
from app.cache.store import Cache
from app.cluster.services import desired_tasks, update_state
from app.cooperate import pause
from app.resources import ResourceKind
from app.topology.model import Graph, GraphEdge, GraphNode, HyperEdge, Metadata, urn

PART = 5_000
Readable = Callable[[Entry], bool] | None


def ports(raw: dict[str, Any]) -> list[str]:
    """``published:target/protocol`` per port: the engine's assigned ports (``Endpoint.Ports``) when
    present, else the spec's; an unpublished port shows an empty published part."""
    declared = dig(raw, "Endpoint", "Ports") or dig(raw, "Spec", "EndpointSpec", "Ports") or []
    return [f"{port.get('PublishedPort') or ''}:{port.get('TargetPort') or ''}/{port.get('Protocol') or 'tcp'}"
            for port in declared if isinstance(port, dict)]


def service_node(cache: Cache, service: Entry, context: str) -> GraphNode:
    image = dig(service.raw, "Spec", "TaskTemplate", "ContainerSpec", "Image")
    return GraphNode(urn("service", service.id), service.name, {
        "@context": context, "kind": "service", "replicas": desired_tasks(cache, service),
        "image": image_reference(image) if isinstance(image, str) else "", "mode": service_mode(service.raw),
        "ports": ports(service.raw), "updateStatus": update_state(service.raw) or None})


def attachments(service: Entry) -> dict[str, list[str]]:
    """Network id → the service's aliases on it (task template networks, and the deprecated
    ``Spec.Networks``)."""
    template = dig(service.raw, "Spec", "TaskTemplate", "Networks") or []
    legacy = dig(service.raw, "Spec", "Networks") or []
    found: dict[str, list[str]] = {}
    for attachment in [*template, *legacy]:
        target = attachment.get("Target") if isinstance(attachment, dict) else None
        if isinstance(target, str) and target:
            known = found.setdefault(target, [])
            for alias in attachment.get("Aliases") or ():
                if isinstance(alias, str) and alias not in known:
                    known.append(alias)
    return found


def is_overlay(network: Entry) -> bool:
    return network.activation["driver"] == "overlay" and not network.raw.get("Ingress")


def _network_ref(network: Entry, aliases: dict[str, list[str]]) -> Metadata:
    ref: Metadata = {"id": urn("network", network.id), "name": network.name,
                     "driver": network.activation["driver"], "scope": network.activation["scope"]}
    if aliases:
        ref["aliases"] = aliases
    return ref


def _edges(cache: Cache, services: list[Entry], context: str, readable: Readable = None) -> list[GraphEdge]:
    members: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)   # network id → (service URN, aliases)
    for service in services:
        for network_id, aliases in attachments(service).items():
            members[network_id].append((urn("service", service.id), aliases))
    pairs: dict[tuple[str, str], list[Metadata]] = {}
    done = 0
    for network_id in sorted(members):
        network = cache.get(ResourceKind.NETWORK, network_id)
        if network is None or not is_overlay(network) or (readable is not None and not readable(network)):
            continue
        attached = sorted(members[network_id])
        for index, (first, first_aliases) in enumerate(attached):
            for second, second_aliases in attached[index + 1:]:
                named = {key: value for key, value in ((first, first_aliases), (second, second_aliases)) if value}
                pairs.setdefault((first, second), []).append(_network_ref(network, named))
                done += 1
                if done % PART == 0:
                    pause()
    return [GraphEdge(source, target, {"@context": context, "networks": networks})
            for (source, target), networks in sorted(pairs.items())]


def _stacks(cache: Cache, context: str, shown: set[str] | None = None, readable: Readable = None) -> list[HyperEdge]:
    stacks = []
    for stack in cache.sorted_entries(ResourceKind.STACK, "name"):
        if readable is not None and not readable(stack):
            continue
        services = sorted(urn("service", service_id) for service_id in stack.raw.get("services") or ()
                          if shown is None or service_id in shown)
        if services:
            stacks.append(HyperEdge(services, {"@context": context, "kind": "stack", "name": stack.name}))
    return stacks


def logical_graph(cache: Cache, context: str, readable: Readable = None) -> Graph:
    services = cache.sorted_entries(ResourceKind.SERVICE, "name")
    shown: set[str] | None = None
    if readable is not None:
        services = [service for service in services if readable(service)]
        shown = {service.id for service in services}
    return Graph("network", "network-topology", "Service network topology", directed=False,
                 metadata={"@context": context, "@type": "NetworkTopology"},
                 nodes=[service_node(cache, service, context) for service in services],
                 edges=_edges(cache, services, context, readable), hyperedges=_stacks(cache, context, shown, readable))
