"""Checking a tool call's ``arguments`` against the tool's input schema, naming the first field that fails.

Why not a JSON Schema library: the schemas are this project's own (``app.mcp.tool_table``) and use a small
subset (type, properties, required, additionalProperties, items, enum, minimum, maximum, minLength,
maxLength); the runtime does not depend on a validator for that, and the message names the field the way an
agent can act on (``arguments.resources.Limits.NanoCPUs: must be an integer``). Depth and size are bounded by
the transport's body cap; the walk is recursive over the schema, whose depth is fixed.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "object": (dict,), "array": (list,), "boolean": (bool,),
                                       "null": (type(None),), "number": (int, float), "integer": (int,)}
_NAMES = {"string": "a string", "object": "an object", "array": "an array", "boolean": "a boolean", "null": "null",
          "number": "a number", "integer": "an integer"}


class ArgumentError(ValueError):
    """``field``: where (``arguments.replicas``), ``reason``: what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name not in ("boolean",):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[name])


def normalised(value: Any, schema: dict[str, Any]) -> Any:
    """An integral float where an integer is wanted (``5.0``) as an int; anything else unchanged."""
    types = schema.get("type")
    wanted = [types] if isinstance(types, str) else list(types or [])
    if "integer" in wanted and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check(value: Any, schema: dict[str, Any], where: str = "arguments") -> Any:
    """``value`` checked against ``schema`` (integral floats made ints); :class:`ArgumentError` else."""
    types = schema.get("type")
    if types is not None:
        wanted = [types] if isinstance(types, str) else list(types)
        if not any(_is(value, name) for name in wanted):
            raise ArgumentError(where, "must be " + " or ".join(_NAMES[name] for name in wanted))
        value = normalised(value, schema)
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(where, "must be one of " + ", ".join(map(str, schema["enum"])))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ArgumentError(where, f"must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ArgumentError(where, f"must be at most {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value.strip()) < schema["minLength"]:
            raise ArgumentError(where, "must not be empty" if schema["minLength"] == 1
                                else f"must have at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ArgumentError(where, f"must have at most {schema['maxLength']} characters")
    if isinstance(value, dict):
        value = _check_object(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [check(item, schema["items"], f"{where}[{index}]") for index, item in enumerate(value)]
    return value


def _check_object(value: dict[str, Any], schema: dict[str, Any], where: str) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            raise ArgumentError(f"{where}.{name}", "is required")
    extra = schema.get("additionalProperties", True)
    checked: dict[str, Any] = {}
    for name, item in value.items():
        if name in properties:
            checked[name] = check(item, properties[name], f"{where}.{name}")
        elif extra is False:
            raise ArgumentError(f"{where}.{name}", "is not a parameter of this tool" if where == "arguments"
                                else "is not a known member")
        elif isinstance(extra, dict):
            checked[name] = check(item, extra, f"{where}[{name!r}]")
        else:
            checked[name] = item
    return checked
