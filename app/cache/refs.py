"""Cross-references: which other objects' REST representations embed a part of an object, so that a
change to it is also a change to them (``ref_changed`` records).

What each representation embeds (``app.query.representations``; ``service_insights`` reads only the
service's own JSON):

- task item/detail: its service's name (``ServiceName``, ``service.name``) and its node's hostname
  (``NodeHostname``, ``node.hostname``);
- service item: ``RunningTasks`` (its tasks in state running); service detail: a reference to each of its
  tasks (id, name ``<service>.<slot>`` or ``<service>.<node id>``, state, desired state);
- node detail: a reference to each task on the node (the same task reference, so the task's service name);
- config, secret, network, volume detail: a reference (id, name) to each service using it;
- stack detail: the full item of every member (services with their ``RunningTasks``).

``affected`` turns one write (old entry → new entry, either may be None) into the keys of the objects whose
representation it changes, except the stack a task's running count feeds: whether ``RunningTasks`` moved
is only known once the whole write is applied, so the cache compares the counts itself. The cache drops
keys that were themselves created, updated or removed in the same write and keys it does not hold.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from app.cache.entries import Entry, service_references, stack_of
from app.resources import ResourceKind

Key = tuple[ResourceKind, str]
_REF_KINDS = (ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME)
_STACK_MEMBER_KINDS = (ResourceKind.SERVICE, *_REF_KINDS)


class Index(Protocol):
    """The cache lookups the rules need."""

    def get(self, kind: ResourceKind, object_id: str) -> Entry | None: ...

    def task_ids_of_service(self, service_id: str) -> Collection[str]: ...

    def task_ids_of_node(self, node_id: str) -> Collection[str]: ...


def task_reference(task: Entry) -> tuple[object, ...]:
    """What a service or node detail shows of one of its tasks (the task reference and the running count):
    its state, desired state, and name ``<service>.<slot>`` (``<service>.<node id>`` without a slot)."""
    activation = task.activation
    return (activation["state"], activation["desired_state"], activation["service"],
            activation["slot"] or activation["node"])


def affected(old: Entry | None, new: Entry | None, index: Index) -> list[Key]:
    """Objects whose representation embeds what changed from ``old`` to ``new``, possibly repeated."""
    entry = new if new is not None else old
    if entry is None:
        return []
    keys: list[Key] = []
    if entry.kind is ResourceKind.TASK:
        keys += _task(old, new)
    elif entry.kind is ResourceKind.SERVICE:
        keys += _service(entry.id, old, new, index)
    elif entry.kind is ResourceKind.NODE:
        keys += _node(entry.id, old, new, index)
    if entry.kind in _STACK_MEMBER_KINDS:
        # The stack detail shows each member in full: any change to a member changes it (a change of
        # membership also changes the stack itself, and the cache then records that instead).
        keys += [(ResourceKind.STACK, name) for name in {stack_of(e) for e in (old, new) if e} if name]
    return keys


def _task(old: Entry | None, new: Entry | None) -> list[Key]:
    keys: list[Key] = []
    for kind, field in ((ResourceKind.SERVICE, "service"), (ResourceKind.NODE, "node")):
        # The task is listed by the service (node) it names; a change of that id moves it between two.
        if old is not None and new is not None and old.activation[field] == new.activation[field] \
                and task_reference(old) == task_reference(new):
            continue  # e.g. only a timestamp or a message moved: no embedding shows it
        keys += [(kind, str(task.activation[field])) for task in (old, new) if task is not None]
    return keys


def _service(service_id: str, old: Entry | None, new: Entry | None, index: Index) -> list[Key]:
    before = service_references(old) if old else {}
    after = service_references(new) if new else {}
    old_name = old.name if old else None
    new_name = new.name if new else None
    keys: list[Key] = []
    for kind in _REF_KINDS:
        used_before, used_after = before.get(kind, set()), after.get(kind, set())
        # A rename shows in every reference; otherwise only objects gaining or losing the service see it.
        targets = used_before | used_after if old_name != new_name else used_before ^ used_after
        keys += [(kind, target) for target in sorted(targets)]
    if old_name != new_name:
        # Task names (``<service>.<slot>``) and ServiceName carry the service name (its id when it is
        # unknown), so its tasks and the nodes listing them change too.
        for task_id in sorted(index.task_ids_of_service(service_id)):
            keys.append((ResourceKind.TASK, task_id))
            task = index.get(ResourceKind.TASK, task_id)
            if task is not None:
                keys.append((ResourceKind.NODE, str(task.activation["node"])))
    return keys


def _node(node_id: str, old: Entry | None, new: Entry | None, index: Index) -> list[Key]:
    if old is not None and new is not None and old.name == new.name:
        return []  # tasks show the node's hostname only
    return [(ResourceKind.TASK, task_id) for task_id in sorted(index.task_ids_of_node(node_id))]
