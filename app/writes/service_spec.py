"""THE table of service sub-resources (``/services/{id}/<name>``) and how a PUT or a PATCH becomes a new spec.

One row per sub-resource: its response key and JSON-LD type, a getter over the service ``Spec``, a check of
a whole value (raising the sub-resource's code with the field named), a setter writing the engine's shape,
and a patch style:

- ``map`` (env, labels): the relaxed map rules (``app.writes.patch.map_json_patch`` / ``map_merge_patch``);
- ``object``: RFC 7396 merge patch over the object, RFC 6902 over it;
- ``list``: a merge patch is ``{"<key>": [...]}`` or a bare array and replaces the list; RFC 6902 applies to it;
- ``none`` (mode, endpoint-mode): PUT only.

A PUT takes the whole value bare or enveloped as the GET shows it (``{"env": {...}}``, JSON-LD ``@`` members
ignored), so GET → edit → PUT works. Every path ends in :func:`checked`, so a bad value fails before the
engine is called and nothing is half-applied. Independent of Flask: the agent tools reuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app.errors import ProblemError
from app.writes import service_container as cc
from app.writes import service_refs as refs
from app.writes import service_values as v
from app.writes.operations import JSON_PATCH, SERVICE_SUBRESOURCES
from app.writes.patch import json_patch, map_json_patch, map_merge_patch, merge_patch
from app.writes.service_refs import References

Spec = dict[str, Any]
Style = Literal["map", "object", "list", "none"]


@dataclass(frozen=True, slots=True)
class SubResource:
    name: str                                   # URL segment: update-policy
    key: str | None                             # response member (None: the value's members are the body)
    jsonld_type: str                            # ServiceUpdatePolicy
    style: Style
    get: Callable[[Spec], Any]
    check: Callable[[Any, References], Any]     # the whole value → normalised value, or ProblemError
    set: Callable[[Spec, Any], None]
    code: str                                   # the problem code of a bad value
    nullable: bool = False                      # the value may be null (no healthcheck, no log driver)
    answers_service: bool = False               # the write answers the service detail

    @property
    def operations(self) -> tuple[str, ...]:
        """Names of its rows in ``app.writes.operations``: (PUT, PATCH) or (PUT,)."""
        if self.name == "mode":
            return ("set_service_mode",)
        if self.name == "endpoint-mode":
            return ("set_service_endpoint_mode",)
        snake = self.name.replace("-", "_")
        return (f"put_service_{snake}", f"patch_service_{snake}")

    def members(self, spec: Spec) -> dict[str, Any]:
        """The GET body's members (besides ``@context``, ``@id``, ``@type``)."""
        value = self.get(spec)
        return dict(value) if self.key is None else {self.key: value}


def _plain(check: Callable[[Any], Any]) -> Callable[[Any, References], Any]:
    return lambda value, known: check(value)


def _row(name: str, key: str | None, style: Style, get: Callable[[Spec], Any], check: Callable[[Any, References], Any],
         setter: Callable[[Spec, Any], None], code: str, **options: bool) -> SubResource:
    pascal = "".join(part.capitalize() for part in name.split("-"))
    return SubResource(name, key, f"Service{pascal}", style, get, check, setter, code, **options)


_ROWS = (
    _row("env", "env", "map", v.get_env, _plain(v.check_env), v.set_env, v.BODY),
    _row("labels", "labels", "map", v.get_labels, _plain(v.check_labels), v.set_labels, v.BODY),
    _row("resources", "resources", "object", v.get_resources, _plain(v.check_resources), v.set_resources, "SVC011"),
    _row("placement", "placement", "object", v.get_placement, _plain(v.check_placement), v.set_placement, v.BODY),
    _row("ports", "ports", "list", v.get_ports, _plain(v.check_ports), v.set_ports, v.BODY),
    _row("update-policy", "updatePolicy", "object", v.get_update_policy, _plain(v.check_update_policy),
         v.set_update_policy, "SVC012"),
    _row("rollback-policy", "rollbackPolicy", "object", v.get_rollback_policy, _plain(v.check_rollback_policy),
         v.set_rollback_policy, "SVC013"),
    _row("log-driver", "logDriver", "object", v.get_log_driver, _plain(v.check_log_driver), v.set_log_driver,
         "SVC019", nullable=True),
    _row("healthcheck", "healthcheck", "object", v.get_healthcheck, _plain(v.check_healthcheck), v.set_healthcheck,
         "SVC014", nullable=True),
    _row("container-config", "containerConfig", "object", cc.get_container_config,
         _plain(cc.check_container_config), cc.set_container_config, cc.CODE),
    _row("configs", "configs", "list", refs.file_refs_getter(refs.CONFIGS), refs.file_refs_checker(refs.CONFIGS),
         refs.file_refs_setter(refs.CONFIGS), refs.CONFIGS.code),
    _row("secrets", "secrets", "list", refs.file_refs_getter(refs.SECRETS), refs.file_refs_checker(refs.SECRETS),
         refs.file_refs_setter(refs.SECRETS), refs.SECRETS.code),
    _row("networks", "networks", "list", refs.get_networks, refs.check_networks, refs.set_networks, "SVC017"),
    _row("mounts", "mounts", "list", v.get_mounts, _plain(v.check_mounts), v.set_mounts, v.BODY),
    _row("mode", None, "none", v.get_mode, _plain(v.check_mode), v.set_mode, "SVC008", answers_service=True),
    _row("endpoint-mode", None, "none", v.get_endpoint_mode, _plain(v.check_endpoint_mode), v.set_endpoint_mode,
         "SVC010", answers_service=True),
)
SUBRESOURCES: dict[str, SubResource] = {row.name: row for row in _ROWS}
assert set(SERVICE_SUBRESOURCES) <= set(SUBRESOURCES), "every operation-table sub-resource has a row"


def subresource(name: str) -> SubResource:
    return SUBRESOURCES[name]


# ---------------------------------------------------------------------------------------------- bodies
def unwrap(sub: SubResource, body: Any) -> Any:
    """The value of a body that may be enveloped as the GET shows it: ``{"<key>": value}`` plus JSON-LD ``@``
    members. A map is enveloped only when the key holds an object (a variable named ``env`` is a string)."""
    if not isinstance(body, dict):
        return body
    members = {key: item for key, item in body.items() if not key.startswith("@")}
    if sub.key is None:
        return members
    if list(members) != [sub.key]:
        return body
    inner = members[sub.key]
    enveloped = {"map": isinstance(inner, dict), "object": inner is None or isinstance(inner, dict),
                 "list": isinstance(inner, list)}.get(sub.style, False)
    return inner if enveloped else body


def checked(sub: SubResource, value: Any, known: References) -> Any:
    """The whole new value, checked and normalised (raises the sub-resource's problem)."""
    if value is None and not sub.nullable and sub.style == "list":
        raise ProblemError(sub.code, detail=f"{sub.key}: must be a JSON array, not null.", extra={"field": sub.key})
    return sub.check(value, known)


def put_value(sub: SubResource, body: Any, known: References) -> Any:
    """The checked value of a PUT body (bare or enveloped)."""
    return checked(sub, unwrap(sub, body), known)


def patch_value(sub: SubResource, spec: Spec, media: str, patch: Any, known: References) -> Any:
    """The checked value after applying a patch (``media``: one of the two patch types) to the current one."""
    current = sub.get(spec)
    if sub.style == "map":
        result = map_json_patch(current, patch) if media == JSON_PATCH else map_merge_patch(current, unwrap(sub, patch))
    elif sub.style == "object":
        result = json_patch(current, patch) if media == JSON_PATCH \
            else merge_patch({} if current is None else current, unwrap(sub, patch))
    elif sub.style == "list":
        if media == JSON_PATCH:
            result = json_patch(current, patch)
        else:
            result = unwrap(sub, patch)
            if not isinstance(result, list):
                raise ProblemError("API006", extra={"field": sub.key},
                                   detail=f"A merge patch of {sub.key} is {{\"{sub.key}\": [...]}} or an array; "
                                          "it replaces the whole list.")
    else:
        raise ValueError(f"{sub.name} has no PATCH")
    return checked(sub, result, known)


def apply(sub: SubResource, spec: Spec, value: Any) -> None:
    """Write a checked value into ``spec`` (in place)."""
    sub.set(spec, value)
