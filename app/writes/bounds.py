"""Bounds on what one write may ask: replicas, labels, environment entries, patch size, string length.

Why: a scale to a billion replicas was accepted, and the engine built tasks until it ran out of memory and
never recovered. Every spec a write sends is checked here first (:func:`check_spec`, called by
``app.http.writes.update_versioned`` for services, nodes, configs and secrets), and every patch body before
it is applied (:func:`check_patch`). A value past its bound is refused with ``API018``, whose body names the
``field``, the ``limit``, the ``requested`` value and the ``setting`` that raises the limit.

Only growth is refused: a value that is already past a bound (an object made outside Shoal, or before the
limit was lowered) may stay as it is or shrink, so a label edit on a 2,000-replica service still works and
scaling it down is always allowed. Flask-free, so the agent tools can reuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.config import Settings
from app.cooperate import pause
from app.errors import ProblemError

_PAUSE_EVERY = 5_000   # items walked between two turns of the event loop (a 1 MiB body has ~100k strings)


@dataclass(frozen=True, slots=True)
class WriteBounds:
    max_replicas: int = 1000
    max_labels: int = 256
    max_env: int = 1000
    max_patch_operations: int = 1000
    max_string_length: int = 65536

    @classmethod
    def of(cls, settings: Settings) -> WriteBounds:
        return cls(settings.writes_max_replicas, settings.writes_max_labels, settings.writes_max_env,
                   settings.writes_max_patch_operations, settings.writes_max_string_length)


_SETTINGS = {"max_replicas": "writes.max_replicas", "max_labels": "writes.max_labels",
             "max_env": "writes.max_env", "max_patch_operations": "writes.max_patch_operations",
             "max_string_length": "writes.max_string_length"}


def exceeded(field: str, bound: str, limit: int, requested: int, what: str) -> ProblemError:
    """The ``API018`` problem: it says the bound, so a client can correct itself without guessing."""
    setting = _SETTINGS[bound]
    return ProblemError("API018", detail=f"{field}: {what} {requested} exceeds the limit of {limit} "
                                         f"({setting}); nothing was written.",
                        extra={"field": field, "limit": limit, "requested": requested, "setting": setting})


def _path(spec: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(spec, dict):
            return None
        spec = spec.get(key)
    return spec


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (dict, list)) else 0


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _grows(before: int, after: int, limit: int) -> bool:
    return after > limit and after > before


def check_spec(before: dict[str, Any], after: dict[str, Any], bounds: WriteBounds) -> None:
    """Refuse a new spec (any versioned kind) that grows a value past its bound.

    :raises ProblemError: ``API018`` naming the first bound exceeded.
    """
    counted = (
        (("Mode", "Replicated", "Replicas"), "replicas", "max_replicas", _number, "replicas"),
        (("Mode", "ReplicatedJob", "MaxConcurrent"), "mode.maxConcurrent", "max_replicas", _number,
         "concurrent job tasks"),
        (("Labels",), "labels", "max_labels", _count, "label count"),
        (("TaskTemplate", "ContainerSpec", "Labels"), "containerLabels", "max_labels", _count, "label count"),
        (("TaskTemplate", "ContainerSpec", "Env"), "env", "max_env", _count, "environment entry count"),
    )
    for keys, field, bound, measure, what in counted:
        limit = getattr(bounds, bound)
        requested, current = measure(_path(after, *keys)), measure(_path(before, *keys))
        if _grows(current, requested, limit):
            raise exceeded(field, bound, limit, requested, what)
    _check_strings(before, after, bounds.max_string_length)


def _check_strings(before: Any, after: Any, limit: int) -> None:
    """A string longer than the limit is refused unless the old spec already held that very string."""
    long_after = [text for text in _strings(after) if len(text) > limit]
    if not long_after:
        return
    kept = {text for text in _strings(before) if len(text) > limit}
    for text in long_after:
        if text not in kept:
            raise exceeded("string", "max_string_length", limit, len(text), "a string of length")


def _strings(value: Any) -> Iterator[str]:
    """Every string (keys included) of a decoded JSON value, iteratively (no recursion limit), giving the
    event loop a turn every few thousand items."""
    stack = [value]
    walked = 0
    while stack:
        item = stack.pop()
        walked += 1
        if walked % _PAUSE_EVERY == 0:
            pause()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, member in item.items():
                yield str(key)
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(item)


def check_patch(patch: Any, bounds: WriteBounds) -> None:
    """A JSON Patch may hold at most ``max_patch_operations`` operations; a merge patch as many members
    (all levels counted), so one request cannot ask for unbounded work.

    :raises ProblemError: ``API018`` (field ``patch``).
    """
    limit = bounds.max_patch_operations
    if isinstance(patch, list):
        if len(patch) > limit:
            raise exceeded("patch", "max_patch_operations", limit, len(patch), "operation count")
        return
    members = _members(patch)
    if members > limit:
        raise exceeded("patch", "max_patch_operations", limit, members, "member count")


def _members(patch: Any) -> int:
    count, stack = 0, [patch]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack.extend(member for member in item.values() if isinstance(member, dict))
    return count
