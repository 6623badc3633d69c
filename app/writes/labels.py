"""Labels of nodes, configs and secrets as a sub-resource: read, replace (PUT), edit (PATCH).

Pure functions over the engine's ``Spec.Labels`` map, shared by the node and the config/secret views, so
the three kinds read, validate and patch labels the same way. Everything is checked before the engine is
called: a write either applies the whole new map or nothing.

PUT takes the whole map, bare (``{"tier":"db"}``) or wrapped (``{"labels":{"tier":"db"}}``, the shape the
GET answers, so a client can send back what it read). A body whose only key is ``labels`` with an object
value is the wrapped form; a label literally named ``labels`` must then be sent wrapped.
PATCH takes the relaxed map patches (``app.writes.patch``): JSON Patch or JSON Merge Patch.

Reserved labels: ``com.docker.stack.*`` belong to ``docker stack deploy``, and the ACL's stack grants rest on
``com.docker.stack.namespace`` (a ``stack:demo`` grant covers what carries ``demo``). So no write may add,
change or remove one on an existing object (:func:`refuse_reserved_changes`, 400 ``API017``, for every
caller: moving an object between stacks is a redeploy, not a label edit); a create that sets the namespace
needs write on that stack as well (``app.http.writes.require_stack_write``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.errors import ProblemError
from app.writes.operations import JSON_PATCH, MERGE_PATCH
from app.writes.patch import map_json_patch, map_merge_patch

MAX_KEY = 1024    # the engine keeps labels in its raft store; a sane bound on one key
RESERVED_PREFIX = "com.docker.stack."
STACK_NAMESPACE = "com.docker.stack.namespace"


def current(raw: dict[str, Any]) -> dict[str, str]:
    """The object's labels (``{}`` when the engine omits them)."""
    labels = (raw.get("Spec") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def validate(labels: Any, code: str = "API006") -> dict[str, str]:
    """A label map: non-empty string keys, string values."""
    if not isinstance(labels, dict):
        raise ProblemError(code, detail="Labels are a JSON object of string keys and string values.")
    for key, value in labels.items():
        if not key.strip() or len(key) > MAX_KEY:
            raise ProblemError(code, detail=f"Label key {key[:40]!r} must be a non-empty string of at most "
                                            f"{MAX_KEY} characters.")
        if not isinstance(value, str):
            raise ProblemError(code, detail=f"The value of label {key!r} must be a string, not {value!r}.")
    return dict(labels)


def from_put(body: Any) -> dict[str, str]:
    """The new map from a PUT body, bare or wrapped in ``{"labels": ...}``."""
    if isinstance(body, dict) and len(body) == 1 and isinstance(body.get("labels"), dict):
        body = body["labels"]
    return validate(body)


def from_patch(labels: dict[str, str], media: str, patch: Any) -> dict[str, str]:
    """Apply a JSON Patch (``add``/``replace``/``remove``/``test`` on keys) or a merge patch."""
    if media == JSON_PATCH:
        result = map_json_patch(labels, patch)
    elif media == MERGE_PATCH:
        result = map_merge_patch(labels, patch)
    else:   # patch_body already refused other types; keep the function total
        raise ProblemError("API004", detail=f"Content-Type {media} is not a patch type.")
    return validate(result, "API011" if media == JSON_PATCH else "API006")


def with_labels(spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The spec with its labels replaced (the rest untouched)."""
    spec["Labels"] = labels
    return spec


# ---------------------------------------------------------------------------------------------- reserved labels
def reserved_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The ``com.docker.stack.*`` keys added, changed or removed between two label maps."""
    keys = {key for key in (*before, *after) if isinstance(key, str) and key.startswith(RESERVED_PREFIX)}
    return sorted(key for key in keys if before.get(key) != after.get(key))


def _label_maps(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The spec's label maps that carry stack membership: the object's and (services) its containers'."""
    container = ((spec.get("TaskTemplate") or {}).get("ContainerSpec") or {}) if isinstance(spec, Mapping) else {}
    maps = {"labels": spec.get("Labels"), "container labels": container.get("Labels")}
    return {where: value if isinstance(value, Mapping) else {} for where, value in maps.items()}


def refuse_reserved_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """400 ``API017`` when a spec update touches a reserved label (checked on every versioned update, so no
    write path can move an object between stacks)."""
    old, new = _label_maps(before), _label_maps(after)
    for where in old:
        changed = reserved_changes(old[where], new[where])
        if changed:
            raise ProblemError("API017", extra={"labels": changed},
                               detail=f"The {where} {', '.join(changed)} are reserved for docker stack deploy "
                                      "(stack membership, which stack grants rest on): keep them as they are; "
                                      "nothing was written.")


def stack_of(labels: Mapping[str, Any]) -> str | None:
    """The stack a new object's labels put it in (``com.docker.stack.namespace``), if any."""
    value = labels.get(STACK_NAMESPACE)
    return value if isinstance(value, str) and value else None
