"""The one evaluator every enforcement point asks (docs/acl.md, Evaluation): may this identity read/write this?

An :class:`Access` is made once per request for one identity (:func:`access_for`): it keeps only the grants
whose audience matches, compiled per permission and resource type into one regular expression, and it
memoises name lookups, so filtering a list of 10,000 tasks costs a dict hit per distinct name.

Rules: mode ``none`` and "no policy" are unrestricted (no policy → every authenticated user has full
access); with a policy, default deny and the union of matching policy grants and the identity's provider
grants. An object is reachable through any of its keys (:func:`keys_of`): a service by ``service:<name>``
and ``stack:<its stack>``; a task by ``task:<id>``, its service's keys and that service's stack; configs,
secrets, networks and volumes by ``<type>:<name>`` and their stack; a node by ``node:<hostname>``; a stack
by ``stack:<name>``. Write implies read (normalised in the policy).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.acl.policy import Grant, Policy, provider_grants
from app.auth.identity import Identity
from app.cache.entries import Entry, dig, stack_of
from app.cache.store import Cache
from app.resources import ResourceKind

Key = tuple[str, str]     # (resource type, name)
_NEVER = re.compile(r"(?!)")


@dataclass(slots=True)
class Access:
    """What one identity may do; ``unrestricted`` skips every check."""

    unrestricted: bool
    grants: tuple[Grant, ...] = ()
    _patterns: dict[tuple[str, str], re.Pattern[str]] = field(default_factory=dict)
    _memo: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    _services: dict[str, dict[str, bool]] = field(default_factory=dict)   # permission → service id → tasks?

    @property
    def has_grants(self) -> bool:
        """Cluster-wide reads need at least one grant (docs/acl.md, Enforcement)."""
        return self.unrestricted or bool(self.grants)

    def allows(self, permission: str, resource_type: str, name: str) -> bool:
        if self.unrestricted:
            return True
        memo_key = (permission, resource_type, name)
        known = self._memo.get(memo_key)
        if known is None:
            known = self._memo[memo_key] = self._pattern(permission, resource_type).match(name) is not None
        return known

    def allows_any(self, permission: str, keys: Iterable[Key]) -> bool:
        return self.unrestricted or any(self.allows(permission, kind, name) for kind, name in keys)

    def can(self, permission: str, entry: Entry, cache: Cache) -> bool:
        """A task is decided by its service (memoised per service id: a 10,000-task list costs a dict hit
        per task), then by its own id only when some grant names tasks; other kinds by their keys."""
        if self.unrestricted:
            return True
        if entry.kind is not ResourceKind.TASK:
            return self.allows_any(permission, keys_of(entry, cache))
        raw = entry.raw
        service_id: Any = raw.get("ServiceID") if type(raw) is dict else dig(raw, "ServiceID")
        by_service = self._services.get(permission)
        if by_service is None:
            by_service = self._services[permission] = {}
        allowed = by_service.get(service_id)
        if allowed is None:
            service = cache.get(ResourceKind.SERVICE, service_id) if isinstance(service_id, str) else None
            allowed = service is not None and self.allows_any(permission, keys_of(service, cache))
            if isinstance(service_id, str):
                by_service[service_id] = allowed
        if allowed:
            return True
        task_pattern = self._pattern(permission, "task")
        return task_pattern is not _NEVER and task_pattern.match(entry.id) is not None

    def can_read(self, entry: Entry, cache: Cache) -> bool:
        return self.can("read", entry, cache)

    def can_write(self, entry: Entry, cache: Cache) -> bool:
        return self.can("write", entry, cache)

    def permissions(self) -> dict[str, list[str]]:
        """``{"<resource pattern>": ["read", "write"]}`` of the grants that apply (``/profile``)."""
        result: dict[str, set[str]] = {}
        for grant in self.grants:
            for resource in grant.resources:
                text = "*" if resource.type == "*" and resource.glob == "*" else f"{resource.type}:{resource.glob}"
                result.setdefault(text, set()).update(grant.permissions)
        return {key: sorted(value) for key, value in sorted(result.items())}

    def _pattern(self, permission: str, resource_type: str) -> re.Pattern[str]:
        key = (permission, resource_type)
        pattern = self._patterns.get(key)
        if pattern is None:
            globs = [resource.regex() for grant in self.grants if permission in grant.permissions
                     for resource in grant.resources if resource.type in (resource_type, "*")]
            pattern = self._patterns[key] = re.compile("|".join(f"(?:{g})" for g in globs)) if globs else _NEVER
        return pattern


UNRESTRICTED = Access(True)


def access_for(identity: Identity, policy: Policy | None, *, auth_enabled: bool) -> Access:
    if not auth_enabled or policy is None:
        return UNRESTRICTED
    matching = tuple(grant for grant in policy.grants if grant.applies_to(identity))
    return Access(False, matching + provider_grants(identity.grants))


_TYPE = {ResourceKind.SERVICE: "service", ResourceKind.NODE: "node", ResourceKind.TASK: "task",
         ResourceKind.CONFIG: "config", ResourceKind.SECRET: "secret", ResourceKind.NETWORK: "network",
         ResourceKind.VOLUME: "volume", ResourceKind.STACK: "stack"}


def keys_of(entry: Entry, cache: Cache) -> list[Key]:
    """Every key the object is reachable by (its own, its service's, its stack's)."""
    kind = entry.kind
    if kind is ResourceKind.TASK:
        keys: list[Key] = [("task", entry.id)]
        service_id = dig(entry.raw, "ServiceID")
        service = cache.get(ResourceKind.SERVICE, service_id) if isinstance(service_id, str) else None
        if service is not None:
            keys += keys_of(service, cache)
        return keys
    keys = [(_TYPE[kind], entry.name)]
    if kind is not ResourceKind.STACK and kind is not ResourceKind.NODE:
        stack = stack_of(entry)
        if stack:
            keys.append(("stack", stack))
    return keys
