"""Patch documents: RFC 7396 JSON Merge Patch, RFC 6902 JSON Patch, and a relaxed map form.

Pure functions over decoded JSON; failures raise ``ProblemError`` with the codes of docs/writes-services.md: a
JSON Patch that cannot be applied is ``API011`` (400), a failed ``test`` operation ``API010`` (409). Nothing is
mutated in place: the caller writes the result or nothing.

String maps (env, labels) follow a relaxed form: the leading ``/`` of a path is optional, a
path is one key (``/a~1b`` unescapes to ``a/b``), only ``add``, ``replace``, ``remove`` and ``test`` apply,
``replace`` and ``remove`` need an existing key, and values are strings.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from app.errors import ProblemError

_MAP_OPS = ("add", "replace", "remove", "test")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 §2: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 over any JSON document (all six operations)."""
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise ProblemError("API011", detail="A JSON Patch is an array of operation objects.")
    try:
        return jsonpatch.apply_patch(target, operations, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise ProblemError("API010", detail=f"JSON Patch test failed: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError,
            IndexError, ValueError) as exc:
        raise ProblemError("API011", detail=f"JSON Patch not applicable: {exc}") from None


def map_json_patch(target: dict[str, str], operations: Any) -> dict[str, str]:
    """The relaxed JSON Patch over a flat string map (env, labels)."""
    if not isinstance(operations, list):
        raise ProblemError("API011", detail="A JSON Patch is an array of operation objects.")
    result = dict(target)
    for index, op in enumerate(operations):
        where = f"operation {index}"
        if not isinstance(op, dict):
            raise ProblemError("API011", detail=f"{where} is not an object.")
        name, path = op.get("op"), op.get("path")
        if name not in _MAP_OPS:
            raise ProblemError("API011", detail=f"{where}: op {name!r} does not apply to a map; "
                                                f"use {', '.join(_MAP_OPS)}.")
        if not isinstance(path, str) or not path.lstrip("/"):
            raise ProblemError("API011", detail=f"{where}: path must name one key.")
        key = path[1:] if path.startswith("/") else path
        if "/" in key:
            raise ProblemError("API011", detail=f"{where}: path {path!r} names more than one level.")
        key = key.replace("~1", "/").replace("~0", "~")
        if name in ("add", "replace", "test") and ("value" not in op or not isinstance(op["value"], str)):
            raise ProblemError("API011", detail=f"{where}: value must be a string.")
        if name in ("replace", "remove") and key not in result:
            raise ProblemError("API011", detail=f"{where}: no key {key!r} to {name}.")
        if name == "test":
            if result.get(key) != op["value"]:
                raise ProblemError("API010", detail=f"{where}: {key!r} is {result.get(key)!r}, "
                                                    f"not {op['value']!r}.")
        elif name == "remove":
            del result[key]
        else:
            result[key] = op["value"]
    return result


def map_merge_patch(target: dict[str, str], patch: Any) -> dict[str, str]:
    """Merge Patch over a flat string map: ``null`` deletes, strings set."""
    if not isinstance(patch, dict):
        raise ProblemError("API006", detail="A merge patch of a map is a JSON object.")
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, str):
            result[key] = value
        else:
            raise ProblemError("API006", detail=f"Value of {key!r} must be a string or null.")
    return result
