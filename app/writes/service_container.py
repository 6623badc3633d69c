"""The ``container-config`` sub-resource: camelCase settings ↔ the engine's ``ContainerSpec`` members.

Why a field table: the GET shows every setting (with its default when the spec leaves it out), so a client
can GET, edit and PUT it back; a PUT or merge patch that leaves a field out, or sets it to ``null``, puts it
back to its default, and a default is written by removing the spec member (the engine's own default).
"""

from __future__ import annotations

from typing import Any

from app.writes.service_checks import as_bool, as_int, as_object, as_str, as_strings, only_keys, without_nulls
from app.writes.service_values import Spec, container, container_for_write

CODE = "SVC018"
FIELD = "containerConfig"

# (API name, ContainerSpec member, kind); kind decides the check and the default.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("command", "Command", "strings"), ("args", "Args", "strings"), ("dir", "Dir", "string"),
    ("user", "User", "string"), ("hostname", "Hostname", "string"), ("init", "Init", "optional-bool"),
    ("tty", "TTY", "bool"), ("readOnly", "ReadOnly", "bool"), ("stopSignal", "StopSignal", "string"),
    ("stopGracePeriod", "StopGracePeriod", "optional-ns"), ("capabilityAdd", "CapabilityAdd", "strings"),
    ("capabilityDrop", "CapabilityDrop", "strings"), ("groups", "Groups", "strings"), ("hosts", "Hosts", "strings"),
    ("dnsConfig", "DNSConfig", "dns"),
)
_DEFAULTS: dict[str, Any] = {"strings": [], "string": "", "bool": False, "optional-bool": None, "optional-ns": None,
                             "dns": None}
_DNS = (("nameservers", "Nameservers"), ("search", "Search"), ("options", "Options"))


def get_container_config(spec: Spec) -> dict[str, Any]:
    engine = container(spec)
    config: dict[str, Any] = {}
    for name, member, kind in FIELDS:
        value = engine.get(member)
        if kind == "dns":
            config[name] = None if value is None else {api: list(value.get(key) or []) for api, key in _DNS}
        elif kind == "strings":
            config[name] = list(value or [])
        else:
            config[name] = _DEFAULTS[kind] if value is None else value
    return config


def check_container_config(value: Any) -> dict[str, Any]:
    body = without_nulls(as_object({} if value is None else value, CODE, FIELD))
    only_keys(body, [name for name, _, _ in FIELDS], CODE, FIELD)
    checked: dict[str, Any] = {}
    for name, _, kind in FIELDS:
        field = f"{FIELD}.{name}"
        if name not in body:
            checked[name] = [] if kind == "strings" else _DEFAULTS[kind]
        elif kind == "strings":
            checked[name] = as_strings(body[name], CODE, field)
        elif kind == "string":
            checked[name] = as_str(body[name], CODE, field)
        elif kind in ("bool", "optional-bool"):
            checked[name] = as_bool(body[name], CODE, field)
        elif kind == "optional-ns":
            checked[name] = as_int(body[name], CODE, field)
        else:
            checked[name] = _check_dns(body[name], field)
    return checked


def _check_dns(value: Any, field: str) -> dict[str, list[str]]:
    body = without_nulls(as_object(value, CODE, field))
    only_keys(body, [api for api, _ in _DNS], CODE, field)
    return {api: as_strings(body.get(api, []), CODE, f"{field}.{api}") for api, _ in _DNS}


def set_container_config(spec: Spec, value: dict[str, Any]) -> None:
    engine = container_for_write(spec)
    for name, member, kind in FIELDS:
        item = value.get(name)
        if kind == "dns" and item is not None:
            item = {key: item[api] for api, key in _DNS if item.get(api)} or None
        if item is None or item == [] or item == "" or (kind == "bool" and item is False):
            engine.pop(member, None)
        else:
            engine[member] = item
