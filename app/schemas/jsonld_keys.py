"""JSON-LD keywords in the OpenAPI components, described so that code generators keep every schema.

A body may carry both a JSON-LD keyword and the plain field of the same word (``@id`` and ``id`` in
references, history entries and search hits; ``@type`` and ``type`` in problems). Generators that turn
property names into identifiers (openapi-python-client) map both to ``id``/``type`` and drop the whole
schema, and with it every model that refers to it. The wire format stays as it is: the keyword moves from
``properties`` to an exact ``patternProperties`` entry (``^@id$``), which validates the same member the
same way, and a closed object says so with ``unevaluatedProperties: false`` (OpenAPI 3.1 is JSON Schema
2020-12), which also sees members matched by ``patternProperties``. Generators that read neither keyword
keep the keyword in the model's ``additional_properties`` instead of losing the model.
"""

from __future__ import annotations

import re
from typing import Any

KEYWORD_PREFIX = "@"


def colliding_keywords(schema: dict[str, Any]) -> list[str]:
    """The ``@word`` properties of ``schema`` whose plain ``word`` is a property too."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    return [name for name in properties
            if name.startswith(KEYWORD_PREFIX) and name[len(KEYWORD_PREFIX):] in properties]


def separate_keywords(schema: dict[str, Any]) -> bool:
    """Move the colliding keywords of one object schema to ``patternProperties`` (in place); True if any."""
    names = colliding_keywords(schema)
    if not names:
        return False
    patterns = schema.setdefault("patternProperties", {})
    for name in names:
        patterns[f"^{re.escape(name)}$"] = schema["properties"].pop(name)
    if schema.get("additionalProperties") is False:
        del schema["additionalProperties"]
        schema["unevaluatedProperties"] = False
    return True


def separate_component_keywords(components: dict[str, Any]) -> list[str]:
    """Apply :func:`separate_keywords` to every component schema; the names of the schemas changed."""
    return sorted(name for name, schema in components.items()
                  if isinstance(schema, dict) and separate_keywords(schema))


def separate_nested_keywords(node: Any) -> int:
    """Apply :func:`separate_keywords` to every object schema anywhere below ``node`` (inline response
    schemas and nested members, e.g. a dry run's ``target``); how many changed."""
    changed = 0
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and separate_keywords(node):
            changed += 1
        for value in node.values():
            changed += separate_nested_keywords(value)
    elif isinstance(node, list):
        for value in node:
            changed += separate_nested_keywords(value)
    return changed
