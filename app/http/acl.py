"""The request's :class:`~app.acl.evaluator.Access`, made once per request from its identity and the current
policy, and the problems of a refusal (403 ``ACL001`` read, ``ACL002`` write, naming resource and
permission)."""

from __future__ import annotations

from flask import g

from app.acl.evaluator import Access, access_for
from app.cache.entries import Entry
from app.errors import ProblemError
from app.http.auth import current_identity
from app.runtime import current_runtime


def current_access() -> Access:
    access = g.get("access")
    if isinstance(access, Access):
        return access
    runtime = current_runtime()
    access = access_for(current_identity(), runtime.policy.policy, auth_enabled=runtime.settings.auth_mode != "none")
    g.access = access
    return access


def require_read(entry: Entry) -> Entry:
    """403 ACL001 when the caller may not read ``entry``."""
    if not current_access().can_read(entry, current_runtime().cache):
        raise ProblemError("ACL001", detail=f"read access denied for {describe(entry)}",
                           extra={"resource": describe(entry), "permission": "read"})
    return entry


def describe(entry: Entry) -> str:
    from app.acl.evaluator import keys_of

    kind, name = keys_of(entry, current_runtime().cache)[0]
    return f"{kind}:{name}"
