"""Which stream events a restricted caller may receive (docs/streams.md, docs/acl.md: filtered by read per
item): an event is delivered only when the caller may read the object it shows; ``sync`` always passes.

The keys come from the event's own state (``Built.entry``: the recorded state, the last known one for a
removal), so a removed service is judged by the stack it was in. A task whose service went in the same
write is judged by its id and the stack label the engine copied onto its container spec. An object that
left a stack is judged by where it is now: a reader of the old stack does not see its new state (its list
keeps the object until the next refetch or ``sync``); a leak would be worse than a stale row.

Keys are computed once per event (cached on the ``Built``) and the :class:`~app.acl.evaluator.Access`
memoises each name, so filtering N clients costs about one dict hit per client and event.
"""

from __future__ import annotations

from app.acl import redact
from app.acl.evaluator import Access, Key, keys_of
from app.cache.store import Cache
from app.http.acl_read import finding_readable
from app.recommendations.findings import Finding
from app.resources import STACK_LABEL, ResourceKind
from app.streams.events import Built, Variant


def event_keys(cache: Cache, item: Built) -> tuple[Key, ...]:
    """Every key the event's object is readable through (memoised on ``item``)."""
    known = item.read_keys
    if known is not None:
        return known
    change, entry = item.change, item.entry
    keys: list[Key]
    if entry is None:
        keys = [(change.kind.value, change.id if change.kind is ResourceKind.TASK else change.name or change.id)]
    else:
        keys = keys_of(entry, cache)
        if change.kind is ResourceKind.TASK and len(keys) == 1:   # its service is gone already
            spec = entry.raw.get("Spec") or {}
            labels = (spec.get("ContainerSpec") or {}).get("Labels") if isinstance(spec, dict) else None
            stack = labels.get(STACK_LABEL) if isinstance(labels, dict) else None
            if isinstance(stack, str) and stack:
                keys.append(("stack", stack))
    item.read_keys = result = tuple(keys)
    return result


def may_read(access: Access | None, cache: Cache, item: Built) -> bool:
    return access is None or access.unrestricted or access.allows_any("read", event_keys(cache, item))


def hidden_references(access: Access, cache: Cache, item: Built) -> Variant | None:
    """None when the shared event data suits this reader; else the variant it may see (the hub builds
    each variant once per event and shares it): for a task whose derived ``ServiceName`` /
    ``NodeHostname`` name a service or node the reader may not read, which of the two it may see; for a
    service or task whose engine object embeds configs, secrets, volumes or networks it may not read,
    those references (``app.acl.redact``)."""
    entry = item.entry
    kind = item.change.kind
    if entry is None or kind not in (ResourceKind.TASK, ResourceKind.SERVICE):
        return None
    seen = [True, True]
    if kind is ResourceKind.TASK:
        for index, (ref_kind, key) in enumerate(((ResourceKind.SERVICE, "service"), (ResourceKind.NODE, "node"))):
            ref = cache.get(ref_kind, str(entry.activation[key]))
            seen[index] = ref is None or access.can_read(ref, cache)
    hidden = redact.hidden_references(kind, entry.raw, cache, lambda ref: access.can_read(ref, cache))
    return None if all(seen) and not hidden else (seen[0], seen[1], hidden)


def may_read_finding(access: Access | None, cache: Cache, finding: Finding) -> bool:
    """A finding's keys are those the ``/recommendations`` read uses."""
    return access is None or access.unrestricted or finding_readable(access, cache, finding)
