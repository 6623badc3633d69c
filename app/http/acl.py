"""The request's :class:`~app.acl.evaluator.Access`, made once per request from its identity and the current
policy, and the ACL key of a write (:func:`write_target`, docs/acl.md). Read refusals live in
``app.http.acl_read``; write refusals (ACL002) in ``app.http.allow``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from flask import g

from app.acl.evaluator import Access, Key, access_for, keys_of
from app.cache.entries import dig
from app.http.auth import current_identity
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import Operation


def current_access() -> Access:
    access = g.get("access")
    if isinstance(access, Access):
        return access
    runtime = current_runtime()
    access = access_for(current_identity(), runtime.policy.policy, auth_enabled=runtime.settings.auth_mode != "none")
    g.access = access
    return access


# ---------------------------------------------------------------------------------------------- writes
_PLACEHOLDER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
_CACHED_TYPES = {kind.value: kind for kind in ResourceKind}
SWARM_KEY: Key = ("swarm", "cluster")


@dataclass(frozen=True, slots=True)
class WriteTarget:
    """The keys a write is allowed through (any one suffices) and the ``resource`` an ACL002 names."""

    keys: tuple[Key, ...]
    resource: str


def placeholder_of(rule: str) -> str | None:
    match = _PLACEHOLDER.search(rule)
    return match.group(1) if match else None


def write_target(op: Operation, view_args: Mapping[str, object] | None) -> WriteTarget:
    """The ACL key of ``op`` on the URL's object (docs/acl.md, Writes): creates ``<type>:*``, the swarm
    ``swarm:cluster``, plugins their path name, tasks their parent service's keys (fallback ``task:<id>``),
    other objects every key :func:`~app.acl.evaluator.keys_of` gives (their name and their stack); an id the
    cache does not know falls back to ``<type>:<id>``. A refused caller who may not read the object is told
    only the key it sent (``<type>:<id>``), never the object's name."""
    if op.target == "swarm":
        return WriteTarget((SWARM_KEY,), "swarm:cluster")
    placeholder = placeholder_of(op.rule)
    value = view_args.get(placeholder) if placeholder and view_args else None
    if op.create or not isinstance(value, str):
        return WriteTarget(((op.target, "*"),), f"{op.target}:*")
    fallback: Key = (op.target, value)
    kind = _CACHED_TYPES.get(op.target)
    if kind is None:     # plugins: not cached, named in the path
        return WriteTarget((fallback,), f"{op.target}:{value}")
    cache = current_runtime().cache
    entry = cache.get(kind, value)
    keys: list[Key]
    if entry is None:
        keys = [fallback]
    elif kind is ResourceKind.TASK:
        service_id = dig(entry.raw, "ServiceID")
        service = cache.get(ResourceKind.SERVICE, service_id) if isinstance(service_id, str) else None
        keys = keys_of(service, cache) if service is not None else [fallback]
    else:
        keys = keys_of(entry, cache)
    named = keys[0] if current_access().allows_any("read", keys) else fallback
    return WriteTarget(tuple(keys), f"{named[0]}:{named[1]}")
