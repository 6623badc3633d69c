"""Read enforcement shared by every read path (docs/acl.md, Reads): what the caller may see.

One evaluator (:class:`~app.acl.evaluator.Access`, made once per request by :func:`app.http.acl.current_access`)
answers; this module turns it into the shapes the read paths need:

- :func:`read_filter`: ``None`` for unrestricted access (callers keep their unfiltered fast path, the cache's
  shared lists are not copied), else a per-request predicate over cache entries. Tasks, the large kind, are
  judged by their own ``task:<id>`` (only when a grant can name tasks at all) or by their service, memoised
  per service id, so 10,000 tasks cost about one dict hit each.
- :func:`readable`: a list narrowed to what the caller may read, in slices that yield to the event loop.
- :func:`require_entry` (detail GETs: 403 ``ACL001``), :func:`require_key` (plugins), :func:`require_grants`
  (cluster-wide reads need at least one grant). A refusal names the object by the key the caller sent
  (``<type>:<id>``; stacks, volumes and plugins are named by their path already), never by a name the
  caller may not read.
- :func:`change_readable` (history records, judged by the recorded object when it is gone) and
  :func:`finding_readable` (recommendations, keys per :func:`finding_keys`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flask import g

from app.acl.evaluator import Access, Key, keys_of
from app.acl.policy import Grant
from app.cache.entries import Entry, dig
from app.cache.history import Change
from app.cache.store import Cache
from app.errors import ProblemError
from app.history.selection import stack_label
from app.http.acl import current_access
from app.query.listing import select_yielding
from app.recommendations.findings import Finding
from app.resources import ResourceKind
from app.runtime import current_runtime

Visible = Callable[[Entry], bool]
SWARM_KEY: Key = ("swarm", "cluster")
_TYPES = {kind: kind.value for kind in ResourceKind}
_KINDS = {kind.value: kind for kind in (ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK,
                                        ResourceKind.VOLUME)}


class ReadFilter:
    """``filter(entry) -> bool`` for one request's restricted :class:`Access`."""

    __slots__ = ("_access", "_cache", "_services", "_task_grants")

    def __init__(self, access: Access, cache: Cache) -> None:
        self._access, self._cache = access, cache
        self._services: dict[str, bool] = {}
        self._task_grants = any(resource.type in ("task", "*") for grant in access.grants
                                if "read" in grant.permissions for resource in grant.resources)

    @property
    def memo_key(self) -> tuple[str, tuple[Grant, ...]]:
        """Same grants, same decisions: lists filtered with this key are reused (``app.acl.memo``)."""
        return ("read", self._access.grants)

    def __call__(self, entry: Entry) -> bool:
        if entry.kind is ResourceKind.TASK:
            # keys_of(task) = task:<id> + its service's keys (app.acl.evaluator), evaluated per service once.
            if self._task_grants and self._access.allows("read", "task", entry.id):
                return True
            return self.service(str(entry.activation["service"]))
        return self._access.can_read(entry, self._cache)

    def service(self, service_id: str) -> bool:
        known = self._services.get(service_id)
        if known is None:
            service = self._cache.get(ResourceKind.SERVICE, service_id)
            known = self._services[service_id] = service is not None and self._access.can_read(service, self._cache)
        return known


def read_filter() -> ReadFilter | None:
    """The request's read predicate, or None when every object is readable."""
    access = current_access()
    if access.unrestricted:
        return None
    made = g.get("acl_read_filter")
    if isinstance(made, ReadFilter):
        return made
    g.acl_read_filter = made = ReadFilter(access, current_runtime().cache)
    return made


def readable(entries: Sequence[Entry]) -> Sequence[Entry]:
    """``entries`` the caller may read (the same sequence, uncopied, when unrestricted)."""
    keep = read_filter()
    return entries if keep is None else select_yielding(entries, keep)


def may_read(entry: Entry | None) -> bool:
    keep = read_filter()
    return entry is not None and (keep is None or keep(entry))


def denied(resource: str, permission: str = "read") -> ProblemError:
    return ProblemError("ACL001", detail=f"{permission} access denied for {resource}",
                        extra={"resource": resource, "permission": permission})


def require_entry(entry: Entry) -> Entry:
    """403 ACL001 unless the caller may read ``entry``; named ``<type>:<id>`` (the path's key)."""
    if not may_read(entry):
        raise denied(f"{_TYPES[entry.kind]}:{entry.id}")
    return entry


def require_key(resource_type: str, name: str, sent: str | None = None) -> None:
    """403 ACL001 unless a read grant covers ``<resource_type>:<name>`` (plugins: not cached objects); the
    refusal names the key as the caller ``sent`` it (a plugin's id stays an id)."""
    if not current_access().allows("read", resource_type, name):
        raise denied(f"{resource_type}:{sent or name}")


def require_grants() -> None:
    """Cluster-wide reads (docs/acl.md) need the caller to hold at least one grant."""
    if not current_access().has_grants:
        raise ProblemError("ACL001", detail="read access denied: no grants (cluster-wide reads need at least one)",
                           extra={"resource": "*", "permission": "read"})


# ---------------------------------------------------------------------------------------------- history
def change_keys(change: Change, cache: Cache) -> list[Key]:
    """The keys a history record is readable through: the object's own keys while it is cached, else
    those of its recorded state (name, stack label; a task's service while that is cached, else the stack
    label the engine copied onto its container spec)."""
    entry = cache.get(change.kind, change.id)
    raw: Any = change.after or change.before
    if entry is not None:
        keys = keys_of(entry, cache)
    elif change.kind is ResourceKind.TASK:
        keys = [("task", change.id)]
        service_id = dig(raw, "ServiceID") if isinstance(raw, dict) else None
        service = cache.get(ResourceKind.SERVICE, service_id) if isinstance(service_id, str) else None
        if service is not None:
            keys += keys_of(service, cache)
    elif change.kind is ResourceKind.STACK:
        keys = [("stack", change.id)]
    else:
        keys = [(_TYPES[change.kind], change.name or change.id)]
    if entry is None and change.kind not in (ResourceKind.STACK, ResourceKind.NODE) and isinstance(raw, dict):
        stack = stack_label(change.kind, raw)     # a cached object is judged by where it is now
        if stack and ("stack", stack) not in keys:
            keys.append(("stack", stack))
    return keys


def change_filter() -> Callable[[Change], bool] | None:
    """The predicate of history records the caller may read, or None when unrestricted."""
    access = current_access()
    if access.unrestricted:
        return None
    cache = current_runtime().cache
    return lambda change: access.allows_any("read", change_keys(change, cache))


def require_change(change: Change) -> None:
    """403 ACL001 unless the caller may read the record's object. The refusal names the entry as the caller
    asked for it (``history:<seq>``), never the hidden object's kind or id: sequence numbers are dense, so
    the entry's existence tells nothing, while its kind and id would."""
    check = change_filter()
    if check is not None and not check(change):
        raise denied(f"history:{change.seq}")


# ---------------------------------------------------------------------------------------------- findings
def finding_keys(cache: Cache, finding: Finding) -> list[Key]:
    """A finding's keys: ``service:<targetName>`` (and, through the evaluator, the service's stack),
    ``node:<targetName>``, else ``swarm:cluster``, except that a finding naming another object (an unused
    config, secret, network or volume) is judged by that object's keys: ``swarm:cluster`` alone must not
    reveal its name."""
    if finding.resource_type == "service":
        service = cache.get(ResourceKind.SERVICE, finding.resource_id)
        return keys_of(service, cache) if service is not None else [("service", finding.resource_name)]
    if finding.resource_type == "node":
        return [("node", finding.resource_name)]
    kind = _KINDS.get(finding.resource_type)
    if kind is not None:    # an unused config, secret, network or volume: named, so judged as that object
        entry = cache.get(kind, finding.resource_id)
        return keys_of(entry, cache) if entry is not None else [(finding.resource_type, finding.resource_name)]
    return [SWARM_KEY]


def finding_filter() -> Callable[[Finding], bool] | None:
    access = current_access()
    if access.unrestricted:
        return None
    cache = current_runtime().cache
    return lambda finding: finding_readable(access, cache, finding)


def finding_readable(access: Access, cache: Cache, finding: Finding) -> bool:
    """Readable through its keys, and every service its message names readable too (a node finding that
    lists the services pinned to the node must not name one the caller may not read)."""
    if not access.allows_any("read", finding_keys(cache, finding)):
        return False
    for service_id in finding.mentions:
        service = cache.get(ResourceKind.SERVICE, service_id)
        if service is not None and not access.can_read(service, cache):
            return False
    return True
