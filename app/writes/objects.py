"""Bodies of the object writes (creates, node availability and role), checked and turned into engine bodies.

Pure functions: each takes the decoded request body and answers the engine's create/update body, or raises
the domain's 400 code naming the first problem. Nothing reaches the engine unless the whole body is valid.

Names follow the engine's own rules, so a name the engine would refuse is a clear 400 here instead of an
``ENG003`` carrying an rpc message: configs and secrets as swarmkit validates them (letters, digits,
``-_.`` inside, at most 64 characters), volumes as the local driver does (at least two characters, first
a letter or digit), networks likewise (at least one). Config and secret data is base64 of 1 byte to
1000 KiB (configs) or 500 KiB (secrets), the engine's limits.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from app.errors import ProblemError

CONFIG_NAME = re.compile(r"^[a-zA-Z0-9]+(?:[a-zA-Z0-9_.-]*[a-zA-Z0-9])?$")
MAX_CONFIG_NAME = 64
NETWORK_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
VOLUME_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
DRIVER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.:/-]*$")
MAX_NAME = 255
MAX_DATA = {"config": 1000 * 1024, "secret": 500 * 1024}
AVAILABILITIES = ("active", "pause", "drain")
ROLES = ("worker", "manager")


def _object(body: Any, code: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ProblemError(code, detail="The body must be a JSON object.")
    return body


def _unknown(body: dict[str, Any], allowed: tuple[str, ...], code: str) -> None:
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise ProblemError(code, detail=f"Unknown member(s) {', '.join(extra)}; accepted: {', '.join(allowed)}.")


def _string_map(value: Any, what: str, code: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()) \
            or not all(k.strip() for k in value):
        raise ProblemError(code, detail=f"{what} must be an object of non-empty string keys and string values.")
    return dict(value)


def _flag(body: dict[str, Any], key: str, code: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise ProblemError(code, detail=f"{key} must be true or false, not {value!r}.")
    return value


def _name(body: dict[str, Any], pattern: re.Pattern[str], limit: int, code: str, rule: str) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ProblemError(code, detail="The body needs name, a non-empty string.")
    if len(name) > limit or not pattern.match(name):
        raise ProblemError(code, detail=f"Name {name[:80]!r} is not valid: {rule}, at most {limit} characters.")
    return name


def _driver(body: dict[str, Any], default: str, code: str) -> str:
    driver = body.get("driver", default)
    if not isinstance(driver, str) or not DRIVER_NAME.match(driver) or len(driver) > MAX_NAME:
        raise ProblemError(code, detail=f"driver must be a driver name such as {default!r}, not {driver!r}.")
    return driver


# ---------------------------------------------------------------------------------------------- configs, secrets
def config_create(kind: str, body: Any) -> dict[str, Any]:
    """``{"name", "data": base64, "labels"?}`` → the engine's ``{Name, Data, Labels}`` (CFG004 / SEC004)."""
    code = "CFG004" if kind == "config" else "SEC004"
    body = _object(body, code)
    _unknown(body, ("name", "data", "labels"), code)
    name = _name(body, CONFIG_NAME, MAX_CONFIG_NAME, code,
                 "letters, digits and -_. (not first or last)")
    data = body.get("data")
    if not isinstance(data, str):
        raise ProblemError(code, detail="The body needs data, the content in base64.")
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProblemError(code, detail="data is not valid base64 (RFC 4648 §4, with padding).") from None
    if not 0 < len(decoded) <= MAX_DATA[kind]:
        raise ProblemError(code, detail=f"The {kind} content must be 1 byte to {MAX_DATA[kind] // 1024} KiB; "
                                        f"it is {len(decoded)} bytes.")
    labels = _string_map(body.get("labels"), "labels", code)
    return {"Name": name, "Data": data, "Labels": labels}


# ---------------------------------------------------------------------------------------------- networks, volumes
def network_create(body: Any) -> dict[str, Any]:
    """``{"name", "driver"="overlay", "attachable"?, "internal"?, "labels"?, "options"?}`` → the engine's
    network create body (NET004)."""
    code = "NET004"
    body = _object(body, code)
    _unknown(body, ("name", "driver", "attachable", "internal", "labels", "options"), code)
    return {
        "Name": _name(body, NETWORK_NAME, MAX_NAME, code, "a letter or digit, then letters, digits and -_."),
        "Driver": _driver(body, "overlay", code),
        "Attachable": _flag(body, "attachable", code),
        "Internal": _flag(body, "internal", code),
        "Labels": _string_map(body.get("labels"), "labels", code),
        "Options": _string_map(body.get("options"), "options", code),
        "CheckDuplicate": True,
    }


def volume_create(body: Any) -> dict[str, Any]:
    """``{"name", "driver"="local", "labels"?, "driverOpts"?}`` → the engine's volume create body (VOL003)."""
    code = "VOL003"
    body = _object(body, code)
    _unknown(body, ("name", "driver", "labels", "driverOpts"), code)
    return {
        "Name": _name(body, VOLUME_NAME, MAX_NAME, code, "a letter or digit, then at least one letter, digit or -_."),
        "Driver": _driver(body, "local", code),
        "Labels": _string_map(body.get("labels"), "labels", code),
        "DriverOpts": _string_map(body.get("driverOpts"), "driverOpts", code),
    }


# ---------------------------------------------------------------------------------------------- nodes
def _choice(body: Any, key: str, choices: tuple[str, ...], code: str) -> str:
    value = body.get(key) if isinstance(body, dict) else None
    if value not in choices:
        raise ProblemError(code, detail=f"The body needs {key}, one of {', '.join(choices)} (got {value!r}).")
    return str(value)


def availability(body: Any) -> str:
    """``{"availability": "active"|"pause"|"drain"}`` (NOD004)."""
    return _choice(body, "availability", AVAILABILITIES, "NOD004")


def role(body: Any) -> str:
    """``{"role": "worker"|"manager"}`` (NOD005)."""
    return _choice(body, "role", ROLES, "NOD005")


def role_document(node: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """``{role, isLeader, managerCount}``: the node's desired role (``Spec.Role``, what a PUT sets), whether
    it leads the raft group now, and how many nodes of the cluster have the manager role."""
    return {
        "role": (node.get("Spec") or {}).get("Role") or "worker",
        "isLeader": bool((node.get("ManagerStatus") or {}).get("Leader")),
        "managerCount": sum(1 for n in nodes if (n.get("Spec") or {}).get("Role") == "manager"),
    }
