"""Read-side shapes built from cache entries: list items and detail envelopes with cross-references.

This is where the REST and (later) MCP layers get the same task enrichment, service counters and
cross-reference lists, so the rules live once. Output is plain data; schemas and JSON-LD framing are
applied by ``app.http.respond``.
"""

from __future__ import annotations

from typing import Any

from app.cache.entries import Entry
from app.cache.store import Cache
from app.query import service_insights
from app.resources import ResourceKind

Data = dict[str, Any]


def path_of(kind: ResourceKind, object_id: str) -> str:
    return f"{kind.spec.path}/{object_id}"


def task_name(cache: Cache, task: Entry) -> str:
    """``<service>.<slot>`` for replicated tasks, ``<service>.<node id>`` for global ones."""
    service = cache.get(ResourceKind.SERVICE, str(task.activation["service"]))
    prefix = service.name if service else str(task.activation["service"])
    slot = task.activation["slot"]
    return f"{prefix}.{slot}" if slot else f"{prefix}.{task.activation['node']}"


def item(cache: Cache, entry: Entry) -> Data:
    """One collection item: the engine object plus the derived fields the interface adds per kind."""
    data: Data = dict(entry.raw)
    if entry.kind is ResourceKind.SERVICE:
        data["RunningTasks"] = cache.running_tasks(entry.id)   # kept on write: O(1) for 10,000 tasks
    elif entry.kind is ResourceKind.TASK:
        service = cache.get(ResourceKind.SERVICE, str(entry.activation["service"]))
        node = cache.get(ResourceKind.NODE, str(entry.activation["node"]))
        data["ServiceName"] = service.name if service else ""
        data["NodeHostname"] = node.name if node else ""
    return data


def reference(entry: Entry, base: str, cache: Cache | None = None) -> Data:
    ref: Data = {"@id": base + path_of(entry.kind, entry.id), "id": entry.id,
                 "name": task_name(cache, entry) if cache and entry.kind is ResourceKind.TASK else entry.name}
    if entry.kind is ResourceKind.TASK:
        ref["state"] = entry.activation["state"]
        ref["desiredState"] = entry.activation["desired_state"]
    return ref


def detail(cache: Cache, entry: Entry, base: str) -> Data:
    """The members of a detail envelope besides ``@context``/``@id``/``@type``: the resource under its
    kind's key, then its cross-references (paths under the ``base`` path prefix); a service also gets its
    ``changes`` and ``integrations`` (``app.query.service_insights``)."""
    kind = entry.kind
    body: Data = {kind.spec.detail_key: item(cache, entry)}
    if kind is ResourceKind.NODE:
        body["tasks"] = [reference(task, base, cache) for task in cache.tasks_of_node(entry.id)]
    elif kind is ResourceKind.SERVICE:
        body["tasks"] = [reference(task, base, cache) for task in cache.tasks_of_service(entry.id)]
        body.update(service_insights.detail_members(entry.raw))
    elif kind is ResourceKind.TASK:
        service_id, node_id = str(entry.activation["service"]), str(entry.activation["node"])
        service = cache.get(ResourceKind.SERVICE, service_id)
        node = cache.get(ResourceKind.NODE, node_id)
        body["service"] = {"@id": base + path_of(ResourceKind.SERVICE, service_id), "id": service_id,
                           "name": service.name if service else None}
        body["node"] = {"@id": base + path_of(ResourceKind.NODE, node_id), "id": node_id,
                        "hostname": node.name if node else None} if node_id else None
    elif kind is ResourceKind.STACK:
        members: Data = {"name": entry.name}
        for member_kind in (ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET,
                            ResourceKind.NETWORK, ResourceKind.VOLUME):
            members[member_kind.spec.plural] = [
                {"@id": base + path_of(member_kind, member.id), "@type": member_kind.spec.jsonld_type,
                 **item(cache, member)}
                for member in cache.stack_members(entry.name, member_kind)]
        body["stack"] = members
    else:
        body["services"] = [reference(service, base) for service in cache.services_using(kind, entry.id)]
    return body
