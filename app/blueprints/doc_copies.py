"""flask-smorest's copies of a view's documentation, sharing the marshmallow schemas.

Every flask-smorest decorator (``response``, ``alt_response``, ``arguments``, ``doc``, ...) deep-copies the
documentation gathered so far, so that the wrapped function's own stays unchanged, and registration copies
it twice more. The schema *instances* in it were copied too, field by field: a write view's dozen stacked
decorators copied its schemas a dozen times, ~1 s of start-up and thousands of dead schema copies kept by
the wrappers. Nothing writes to a schema instance once built (flask-smorest and apispec read them; the
runtime parses with the instance its decorator kept, not with a copy), so these copies share them and copy
everything else exactly as ``copy.deepcopy`` does: the OpenAPI document is the same, byte for byte.
"""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

from flask_smorest import arguments, blueprint, etag, pagination, response
from marshmallow import Schema

# flask-smorest's decorators that copy a view's documentation so as to add to it (and only add: they set a
# key of the document or of its "response", "responses", "arguments" members, or append to one of their lists).
_DECORATOR_MODULES: tuple[ModuleType, ...] = (arguments, etag, pagination, response)
# blueprint.py copies too in ``doc`` (which deep-merges into its copy) and at registration (apispec then
# rewrites the copy in place): everything but the schemas is copied there.
_COPYING_MODULES: tuple[ModuleType, ...] = (*_DECORATOR_MODULES, blueprint)
# How deep a decorator's additions reach: the document (1), "response" (2), "responses" (3), the list of one
# status (4). Containers down to there are copied, what they hold (a response's or a parameter's own
# documentation) is shared with the wrapped function's document, which nothing changes.
SPINE_DEPTH = 4
# What copy.deepcopy returns as is (its _deepcopy_atomic); checked first: most of a document is strings.
_ATOMIC = frozenset({str, int, float, bool, type(None), bytes, type})


def copy_doc(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy(value)``, except that marshmallow schema instances are shared, not copied.

    dicts, lists and tuples are copied here (the memo keeps aliases aliased, as deepcopy does); any other
    object goes to ``copy.deepcopy`` with the same memo."""
    if type(value) in _ATOMIC:
        return value
    return _copy(value, {} if memo is None else memo)


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    """:func:`copy_doc` of a non-atomic value; atomic members are taken as they are without a call
    (most of a document is strings: a call per string was most of the copying time)."""
    known = memo.get(id(value), memo)
    if known is not memo:
        return known
    kind = type(value)
    atomic = _ATOMIC
    if kind is dict:
        result: Any = {}
        memo[id(value)] = result
        for key, item in value.items():
            result[key if type(key) in atomic else _copy(key, memo)] = \
                item if type(item) in atomic else _copy(item, memo)
        return result
    if kind is list:
        result = []
        memo[id(value)] = result
        result.extend(item if type(item) in atomic else _copy(item, memo) for item in value)
        return result
    if kind is tuple:
        items = tuple(item if type(item) in atomic else _copy(item, memo) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, Schema):
        return value
    return copy.deepcopy(value, memo)


def copy_spine(value: Any, memo: dict[int, Any] | None = None, depth: int = SPINE_DEPTH) -> Any:
    """A decorator's copy of a view's document: the dicts and lists of its top ``depth`` levels are new,
    everything below is the wrapped function's own (a dozen stacked decorators copied a write view's
    request and response schemas a dozen times)."""
    kind = type(value)
    if depth <= 0 or (kind is not dict and kind is not list):
        return value
    if kind is dict:
        return {key: copy_spine(item, None, depth - 1) for key, item in value.items()}
    return [copy_spine(item, None, depth - 1) for item in value]


def share_schemas_in_doc_copies() -> None:
    """Install the copies in flask-smorest (idempotent; before any decorator runs)."""
    for module in _COPYING_MODULES:
        if getattr(module, "deepcopy", None) not in (copy.deepcopy, copy_doc, copy_spine):
            raise RuntimeError(f"{module.__name__} no longer copies with copy.deepcopy: review app.blueprints."
                               "doc_copies against this flask-smorest version")
    for module in _DECORATOR_MODULES:
        module.deepcopy = copy_spine  # type: ignore[attr-defined]
    blueprint.deepcopy = copy_doc
