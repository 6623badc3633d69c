"""Checks of sub-resource values: each failure is a ``ProblemError`` with the sub-resource's code that names
the field (``detail`` starts with the field path, and the problem carries it as ``field``).

Why its own module: the sub-resource validators (``app.writes.service_values``, ``service_refs``) share
these few checks, and a failure must always say which field is wrong so a client can fix its body; nothing
here knows HTTP or the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.errors import ProblemError


def invalid(code: str, field: str, message: str) -> ProblemError:
    """The problem for a bad field: 400 with the code, the field path in ``detail`` and ``field``."""
    return ProblemError(code, detail=f"{field}: {message}", extra={"field": field})


def as_object(value: Any, code: str, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(code, field, f"must be a JSON object, not {type_name(value)}.")
    return value


def as_list(value: Any, code: str, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(code, field, f"must be a JSON array, not {type_name(value)}.")
    return value


def only_keys(value: dict[str, Any], allowed: Iterable[str], code: str, field: str) -> None:
    """Unknown members are refused rather than dropped: a typo must not be a silent no-op."""
    known = tuple(allowed)
    for key in value:
        if key not in known:
            raise invalid(code, join(field, key), f"unknown member; known: {', '.join(known)}.")


def as_int(value: Any, code: str, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(code, field, f"must be an integer, not {type_name(value)}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise invalid(code, field, f"must be {bound}, not {value}.")
    return int(value)


def as_duration(value: Any, code: str, field: str) -> int:
    """Nanoseconds, as the engine counts them (``5000000000`` is 5 s)."""
    return as_int(value, code, field)


def as_number(value: Any, code: str, field: str, *, minimum: float, maximum: float) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(code, field, f"must be a number, not {type_name(value)}.")
    if not minimum <= value <= maximum:
        raise invalid(code, field, f"must be between {minimum:g} and {maximum:g}, not {value}.")
    number: float | int = value
    return number


def as_str(value: Any, code: str, field: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise invalid(code, field, f"must be a string, not {type_name(value)}.")
    if nonempty and not value.strip():
        raise invalid(code, field, "must not be empty.")
    return value


def as_bool(value: Any, code: str, field: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(code, field, f"must be true or false, not {type_name(value)}.")
    return value


def as_choice(value: Any, choices: tuple[str, ...], code: str, field: str) -> str:
    if value not in choices:
        raise invalid(code, field, f"must be one of {', '.join(choices)}, not {value!r}.")
    return str(value)


def as_strings(value: Any, code: str, field: str) -> list[str]:
    items = as_list(value, code, field)
    for index, item in enumerate(items):
        as_str(item, code, f"{field}[{index}]")
    return list(items)


def as_string_map(value: Any, code: str, field: str) -> dict[str, str]:
    """A flat map of non-empty string keys to string values (env, labels, options)."""
    mapping = as_object(value, code, field)
    for key, item in mapping.items():
        if not key.strip():
            raise invalid(code, field, "keys must not be empty.")
        as_str(item, code, join(field, key))
    return dict(mapping)


def without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """A PUT may say ``null`` for "not set", as a merge patch does."""
    return {key: item for key, item in value.items() if item is not None}


def join(field: str, key: str) -> str:
    return f"{field}.{key}" if field and key else field or key


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)
