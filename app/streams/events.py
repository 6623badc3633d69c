"""One change record → one event: who may receive it (scope keys) and its ``data`` object.

``data`` is ``{@id, @type, type, action, id, resource}`` (docs/streams.md). ``resource``
is the object exactly as the ``<kind>`` member of its REST detail (``app.query.representations`` and the
detail schema: JSON-LD framed, derived fields such as ``RunningTasks``/``ServiceName`` added, secret payloads
never present): for create/update the state the change recorded, for remove the last known state, for
``ref_changed`` the current state (the record carries none; the cache emits it while the object exists).
Cross-references are not repeated in events; ``ref_changed`` says they moved.

Scope keys route an event without testing every client: a stream subscribes to a set of keys and gets the
events that carry any of them.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema

from app.cache.entries import Entry, build_entry, stack_of
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.query import representations
from app.resources import STACK_LABEL, ResourceKind
from app.schemas.registry import detail_schema_for, schema_for

ScopeKey = tuple[str, ...]
# What a restricted reader's copy of an event leaves out: (its task's service readable?, its node
# readable?, the (kind, id) of each embedded reference it may not read: ``app.acl.redact``).
Variant = tuple[bool, bool, frozenset[tuple[str, str]]]
ALL: ScopeKey = ("all",)
_STACK_MEMBER_KINDS = (ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET,
                       ResourceKind.NETWORK, ResourceKind.VOLUME)


def kind_key(kind: ResourceKind) -> ScopeKey:
    return ("kind", kind.value)


def object_key(kind: ResourceKind, object_id: str) -> ScopeKey:
    return ("object", kind.value, object_id)


def stack_key(name: str) -> ScopeKey:
    return ("stack", name)


def _state_raw(change: Change) -> dict[str, Any] | None:
    return change.before if change.action is Action.REMOVE else change.after


def entry_of(cache: Cache, change: Change) -> Entry | None:
    """The entry whose state the event shows: the cached one when it still holds exactly the recorded
    state (no rebuild), else one built from the record; ``ref_changed`` shows the current entry."""
    current = cache.get(change.kind, change.id)
    if change.action is Action.REF_CHANGED:
        return current
    raw = _state_raw(change)
    if raw is None:
        return None
    if current is not None and current.raw is raw:
        return current
    return build_entry(change.kind, raw)


def _raw_stack(raw: dict[str, Any]) -> str:
    spec = raw.get("Spec")
    labels = spec.get("Labels") if isinstance(spec, dict) and "Labels" in spec else raw.get("Labels")
    value = labels.get(STACK_LABEL) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else ""


def _task_stack(cache: Cache, task: Entry) -> str:
    service = cache.get(ResourceKind.SERVICE, str(task.activation["service"]))
    if service is not None:
        return stack_of(service)
    # The service is gone already (removed in the same write): the engine copies the stack label onto
    # the task's container spec.
    labels = ((task.raw.get("Spec") or {}).get("ContainerSpec") or {}).get("Labels") or {}
    value = labels.get(STACK_LABEL) if isinstance(labels, dict) else None
    return value if isinstance(value, str) else ""


def scope_keys(cache: Cache, change: Change, entry: Entry | None) -> frozenset[ScopeKey]:
    """Every key a stream may subscribe to that this change concerns: all, its kind, the object itself and
    the stack it belongs to (members: services, their tasks, configs, secrets, networks, volumes)."""
    keys = {ALL, kind_key(change.kind), object_key(change.kind, change.id)}
    stack = ""
    if change.kind is ResourceKind.STACK:
        stack = change.id
    elif entry is not None and change.kind in _STACK_MEMBER_KINDS:
        stack = stack_of(entry)
        if not stack and change.action is Action.UPDATE and change.before is not None:
            stack = _raw_stack(change.before)   # it left its stack: the stack's stream sees it go
    elif entry is not None and change.kind is ResourceKind.TASK:
        stack = _task_stack(cache, entry)
    if stack:
        keys.add(stack_key(stack))
    return frozenset(keys)


class Built:
    """One change's routing keys, its entry, and (once some client wants it) its encoded data and the ACL
    keys it is readable through (``app.streams.acl``)."""

    __slots__ = ("change", "data", "entry", "keys", "narrowed", "read_keys")

    def __init__(self, change: Change, entry: Entry | None, keys: frozenset[ScopeKey]) -> None:
        self.change = change
        self.entry = entry
        self.keys = keys
        self.data: bytes | None = None
        self.read_keys: tuple[tuple[str, str], ...] | None = None
        # The data for readers who may not see all it references (``Variant``) → bytes.
        self.narrowed: dict[Variant, bytes] | None = None


def built(cache: Cache, change: Change) -> Built:
    entry = entry_of(cache, change)
    return Built(change, entry, scope_keys(cache, change, entry))


def resource_schema(kind: ResourceKind) -> Schema:
    """The schema a kind's event resource is dumped with: its REST detail's, except stacks, whose event
    resource is their collection item (member ids): the members' own events carry their full state, and a
    stack event repeating every member in full on each member change would multiply the bytes sent."""
    return schema_for(kind) if kind is ResourceKind.STACK else detail_schema_for(kind)


def resource_of(cache: Cache, entry: Entry, base: str, visible: representations.Visible = None) -> dict[str, Any]:
    """The object as its REST detail shows it under ``<kind>`` (same builders, same schema; stacks: see
    ``resource_schema``); ``visible`` narrows derived references (a task's ``NodeHostname``) and embedded
    ones (``app.acl.redact``) to what a restricted reader may see."""
    kind = entry.kind
    framed = {"@id": base + representations.path_of(kind, entry.id), "@type": kind.spec.jsonld_type,
              **representations.item(cache, entry, visible)}
    dumped: dict[str, Any] = resource_schema(kind).dump(framed)
    return dumped


def event_data(cache: Cache, change: Change, entry: Entry | None, base: str,
               visible: representations.Visible = None) -> dict[str, Any]:
    kind = change.kind
    data: dict[str, Any] = {"@id": base + representations.path_of(kind, change.id),
                            "@type": kind.spec.jsonld_type, "type": kind.value,
                            "action": change.action.value, "id": change.id}
    if entry is not None:
        data["resource"] = resource_of(cache, entry, base, visible)
    return data
