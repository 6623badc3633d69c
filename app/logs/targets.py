"""Which engine log streams a URL means, read from the cache: a service, a task, or a stack's services.

A missing object is the interface's generic 404 (``about:blank``), as for resource details
(``app.blueprints.resources._lookup``); the TTY flag comes from the cached spec, so opening a stream
costs no inspect round-trip. ``require`` (the ACL's detail check, 403 ``ACL001``) and ``readable`` (the
read predicate; None when unrestricted) come from the view.
"""

from __future__ import annotations

from collections.abc import Callable

from werkzeug.exceptions import NotFound

from app.cache.entries import Entry, dig
from app.cache.store import Cache
from app.engine.logs import LogTarget
from app.resources import ResourceKind

Require = Callable[[Entry], Entry]


def _anyone(entry: Entry) -> Entry:
    return entry


def _lookup(cache: Cache, kind: ResourceKind, object_id: str) -> Entry:
    entry = cache.get(kind, object_id)
    if entry is None:
        raise NotFound(f"No {kind.value} {object_id!r}.")
    return entry


def service_target(entry: Entry) -> LogTarget:
    tty = dig(entry.raw, "Spec", "TaskTemplate", "ContainerSpec", "TTY")
    return LogTarget("services", entry.id, tty is True)


def service_targets(cache: Cache, service_id: str, require: Require = _anyone) -> list[LogTarget]:
    return [service_target(require(_lookup(cache, ResourceKind.SERVICE, service_id)))]


def task_targets(cache: Cache, task_id: str, require: Require = _anyone) -> list[LogTarget]:
    entry = require(_lookup(cache, ResourceKind.TASK, task_id))
    return [LogTarget("tasks", entry.id, dig(entry.raw, "Spec", "ContainerSpec", "TTY") is True)]


def stack_targets(cache: Cache, name: str, readable: Callable[[Entry], bool] | None = None,
                  denied: Callable[[Entry], Exception] | None = None) -> list[LogTarget]:
    """Every (readable) service of the stack now (services added to it later are not followed by an open
    tail); none readable → ``denied(stack)`` is raised."""
    stack = _lookup(cache, ResourceKind.STACK, name)
    services = cache.stack_members(name, ResourceKind.SERVICE)
    if readable is not None:
        services = [entry for entry in services if readable(entry)]
        if not services and denied is not None:
            raise denied(stack)
    return [service_target(entry) for entry in services]
