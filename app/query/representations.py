"""Read-side shapes built from cache entries: list items and detail envelopes with cross-references.

This is where the REST and (later) MCP layers get the same task enrichment, service counters and
cross-reference lists, so the rules live once. Output is plain data; schemas and JSON-LD framing are
applied by ``app.http.respond``.

``visible`` (an ACL read predicate; None: everything) narrows the cross-references: an object the caller
may not read is left out of the lists, and the names of a task's service and node become blank (item) or
null (detail), so no unreadable name reaches the body. The engine objects of services and tasks are passed
through ``app.acl.redact`` for a restricted reader (embedded config/secret/volume/network names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.acl.redact import redact
from app.cache.entries import Entry
from app.cache.store import Cache
from app.query import service_insights
from app.resources import ResourceKind

Data = dict[str, Any]
Visible = Callable[[Entry], bool] | None


def path_of(kind: ResourceKind, object_id: str) -> str:
    return f"{kind.spec.path}/{object_id}"


def _shown(entry: Entry | None, visible: Visible) -> Entry | None:
    return entry if entry is not None and (visible is None or visible(entry)) else None


def task_name(cache: Cache, task: Entry, visible: Visible = None) -> str:
    """``<service>.<slot>`` for replicated tasks, ``<service>.<node id>`` for global ones (the service's id
    in place of a name the caller may not read)."""
    service = _shown(cache.get(ResourceKind.SERVICE, str(task.activation["service"])), visible)
    prefix = service.name if service else str(task.activation["service"])
    slot = task.activation["slot"]
    return f"{prefix}.{slot}" if slot else f"{prefix}.{task.activation['node']}"


def item(cache: Cache, entry: Entry, visible: Visible = None) -> Data:
    """One collection item: the engine object plus the derived fields the interface adds per kind."""
    data: Data = dict(entry.raw if visible is None else redact(entry, cache, visible))
    if entry.kind is ResourceKind.SERVICE:
        data["RunningTasks"] = cache.running_tasks(entry.id)   # kept on write: O(1) for 10,000 tasks
    elif entry.kind is ResourceKind.TASK:
        service = _shown(cache.get(ResourceKind.SERVICE, str(entry.activation["service"])), visible)
        node = _shown(cache.get(ResourceKind.NODE, str(entry.activation["node"])), visible)
        data["ServiceName"] = service.name if service else ""
        data["NodeHostname"] = node.name if node else ""
    return data


def reference(entry: Entry, base: str, cache: Cache | None = None, visible: Visible = None) -> Data:
    ref: Data = {"@id": base + path_of(entry.kind, entry.id), "id": entry.id,
                 "name": task_name(cache, entry, visible) if cache and entry.kind is ResourceKind.TASK else entry.name}
    if entry.kind is ResourceKind.TASK:
        ref["state"] = entry.activation["state"]
        ref["desiredState"] = entry.activation["desired_state"]
    return ref


def _kept(entries: list[Entry], visible: Visible) -> list[Entry]:
    return entries if visible is None else [entry for entry in entries if visible(entry)]


def detail(cache: Cache, entry: Entry, base: str, visible: Visible = None) -> Data:
    """The members of a detail envelope besides ``@context``/``@id``/``@type``: the resource under its
    kind's key, then its cross-references (paths under the ``base`` path prefix); a service also gets its
    ``changes`` and ``integrations`` (``app.query.service_insights``)."""
    kind = entry.kind
    body: Data = {kind.spec.detail_key: item(cache, entry, visible)}
    if kind is ResourceKind.NODE:
        tasks = _kept(cache.tasks_of_node(entry.id), visible)
        body["tasks"] = [reference(task, base, cache, visible) for task in tasks]
    elif kind is ResourceKind.SERVICE:
        tasks = _kept(cache.tasks_of_service(entry.id), visible)
        body["tasks"] = [reference(task, base, cache, visible) for task in tasks]
        body.update(service_insights.detail_members(entry.raw if visible is None else redact(entry, cache, visible)))
    elif kind is ResourceKind.TASK:
        service_id, node_id = str(entry.activation["service"]), str(entry.activation["node"])
        service = _shown(cache.get(ResourceKind.SERVICE, service_id), visible)
        node = _shown(cache.get(ResourceKind.NODE, node_id), visible)
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
                 **item(cache, member, visible)}
                for member in _kept(cache.stack_members(entry.name, member_kind), visible)]
        body["stack"] = members
    else:
        body["services"] = [reference(service, base)
                            for service in _kept(cache.services_using(kind, entry.id), visible)]
    return body
