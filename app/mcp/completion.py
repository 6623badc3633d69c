"""``completion/complete`` for the resource templates: values an agent can put in a template's variable.

Values are what the URI accepts (``app.mcp.uris``): names first (those starting with the typed value, then
those containing it, case-insensitively, each group sorted), then the ids starting with it (an empty value
offers names only); tasks, which
URIs name by id only, complete to ids (ids starting with the value, then the ids of tasks whose name
``<service>.<slot>`` starts with or contains it). Only objects the caller may read are considered (the
REST read predicate), at most :data:`MAX_VALUES` values are returned, with the ``total`` found and
``hasMore``. The walk over a kind pauses every :data:`YIELD_EVERY` objects (10,000 tasks).
"""

from __future__ import annotations

from typing import Any

from app.cooperate import pause
from app.http.acl_read import read_filter
from app.mcp import uris
from app.mcp.registry import INVALID_PARAMS, CallContext, RpcError, method
from app.query.representations import task_name
from app.resources import ResourceKind
from app.runtime import current_runtime

MAX_VALUES = 100
MAX_VALUE_LENGTH = 256
YIELD_EVERY = 2_000


def _template(params: dict[str, Any]) -> uris.Template:
    ref = params.get("ref")
    if not isinstance(ref, dict) or ref.get("type") != "ref/resource":
        raise RpcError(INVALID_PARAMS, "ref must be {type: \"ref/resource\", uri: <a resource template>} "
                                       "(this server has no prompts)")
    template = uris.TEMPLATES_BY_URI.get(ref.get("uri"))   # type: ignore[arg-type]
    if template is None:
        raise RpcError(INVALID_PARAMS, f"Unknown resource template: {ref.get('uri')!r}",
                       {"templates": list(uris.TEMPLATES_BY_URI)})
    return template


def _argument(params: dict[str, Any], template: uris.Template) -> str:
    argument = params.get("argument")
    if not isinstance(argument, dict) or not isinstance(argument.get("value", ""), str):
        raise RpcError(INVALID_PARAMS, "argument must be {name, value} with a string value")
    if argument.get("name") != template.variable:
        raise RpcError(INVALID_PARAMS, f"{template.uri_template} has one argument: {template.variable}")
    value: str = argument.get("value", "")
    if len(value) > MAX_VALUE_LENGTH:
        raise RpcError(INVALID_PARAMS, f"argument.value is longer than {MAX_VALUE_LENGTH} characters")
    return value


def candidates(kind: ResourceKind, value: str) -> list[str]:
    """Every matching value in answer order, deduplicated (the caller cuts at :data:`MAX_VALUES`)."""
    cache = current_runtime().cache
    keep = read_filter()
    needle = value.lower()
    starts: list[str] = []
    contains: list[str] = []
    ids: list[str] = []
    for index, entry in enumerate(cache.entries(kind)):
        if index and index % YIELD_EVERY == 0:
            pause()
        if keep is not None and not keep(entry):
            continue
        if kind.spec.id_is_name:     # stacks and volumes: the name is the id
            _match(entry.name.lower(), needle, entry.name, starts, contains)
            continue
        if (needle or kind is ResourceKind.TASK) and entry.id.lower().startswith(needle):
            ids.append(entry.id)
        if kind is ResourceKind.TASK:
            _match(task_name(cache, entry, keep).lower(), needle, entry.id, starts, contains)
        else:
            _match(entry.name.lower(), needle, entry.name, starts, contains)
    if kind is ResourceKind.TASK:   # ids matched by id first, then by the task's name
        ordered = sorted(ids) + sorted(starts) + sorted(contains)
    else:
        ordered = sorted(starts) + sorted(contains) + sorted(ids)
    return list(dict.fromkeys(ordered))


def _match(name: str, needle: str, value: str, starts: list[str], contains: list[str]) -> None:
    if name.startswith(needle):
        starts.append(value)
    elif needle in name:
        contains.append(value)


@method("completion/complete")
def complete(ctx: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    template = _template(params)
    found = candidates(template.kind, _argument(params, template))
    return {"completion": {"values": found[:MAX_VALUES], "total": len(found), "hasMore": len(found) > MAX_VALUES}}

