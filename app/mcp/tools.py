"""``tools/list`` and ``tools/call``: the 23 agent tools (docs/agent-tools.md).

``tools/list`` shows the tools whose tier is within the agents' level (``mcp.operations_level``, else the
server's) and that the caller could ever use: a write tool needs a write grant on some type its objects are
reachable through (a service tool: ``service`` or ``stack``), a read tool a read grant (``search``: any
grant); with ``auth.mode = none`` or no policy, every tool within the level.

``tools/call`` answers a tool result, never a JSON-RPC error, once ``params.name`` is a string (the SDK's
own servers do the same): an unknown name, a tool above the level and arguments the input schema refuses
are ``isError: true`` results naming the reason (the field, for arguments). A write tool runs its REST
write (``app.mcp.tool_dispatch``), so the level (OPS001), the ACL (ACL002 on ``<type>:<name>``) and every
rule of the write are the REST ones; a refusal is ``isError: true`` with ``"<title>: <detail> (<code>)"``
and the problem as ``structuredContent``. Success: a write answers the object as its detail shows it now
(plain JSON, no JSON-LD envelope), a removal ``{"removed": true}``, a dry run what would change.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.exceptions import HTTPException

from app.acl.evaluator import Access
from app.errors import ProblemError
from app.http.acl import current_access
from app.mcp import tool_dispatch, tool_reads
from app.mcp.registry import INVALID_PARAMS, CallContext, RpcError, method
from app.mcp.tool_schema import ArgumentError, check
from app.mcp.tool_table import TOOLS, ToolDef, tool
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import TIER_NAMES, Tier

Result = dict[str, Any]


def agent_level() -> int:
    return current_runtime().settings.mcp_level


def usable(definition: ToolDef, access: Access) -> bool:
    """Whether some grant could ever let this identity use the tool (the REST path decides per object)."""
    if access.unrestricted:
        return True
    if definition.name == "search":
        return access.has_grants
    permission = "read" if definition.read_only else "write"
    types = {*definition.acl_types, "*"}
    return any(permission in grant.permissions and any(pattern.type in types for pattern in grant.resources)
               for grant in access.grants)


def listed(level: int, access: Access) -> list[ToolDef]:
    return [t for t in TOOLS if t.tier <= level and usable(t, access)]


@method("tools/list")
def tools_list(ctx: CallContext, params: dict[str, Any]) -> Result:
    return {"tools": [t.listing() for t in listed(agent_level(), current_access())]}


# ---------------------------------------------------------------------------------------------- results
def _plain(body: Any) -> Any:
    """A REST body without its JSON-LD members (``@context``, ``@id``, ``@type``)."""
    if isinstance(body, dict):
        return {key: value for key, value in body.items() if not key.startswith("@")}
    return body


def success(structured: dict[str, Any]) -> Result:
    return {"content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}],
            "structuredContent": structured, "isError": False}


def failure(text: str, structured: dict[str, Any] | None = None) -> Result:
    result: Result = {"content": [{"type": "text", "text": text}], "isError": True}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def problem_failure(problem: dict[str, Any]) -> Result:
    """``"<title>: <detail> (<code>)"`` and the problem itself."""
    title, detail, code = problem.get("title") or "Error", problem.get("detail"), problem.get("code")
    text = f"{title}: {detail}" if detail else str(title)
    return failure(f"{text} ({code})" if code else text, _plain(problem))


def _raised(error: ProblemError | HTTPException) -> Result:
    if isinstance(error, ProblemError):
        problem = {"type": f"/api/errors/{error.code}", "title": error.title, "status": error.status,
                   "detail": error.detail, "code": error.code, **error.extra}
    else:
        problem = {"type": "about:blank", "title": error.name, "status": error.code, "detail": error.description}
    return problem_failure(problem)


# ---------------------------------------------------------------------------------------------- ids
_NAMED = {ResourceKind.SERVICE, ResourceKind.NODE, ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK}


def resolve(kind: ResourceKind, value: str) -> str:
    """An id as given, or the id of the one object of that name (a node: hostname); else the value as given
    (the REST write then answers its 404)."""
    cache = current_runtime().cache
    if kind not in _NAMED or cache.get(kind, value) is not None:
        return value
    found = [entry.id for entry in cache.entries(kind) if entry.name == value]
    return found[0] if len(found) == 1 else value


# ---------------------------------------------------------------------------------------------- calls
@method("tools/call")
def tools_call(ctx: CallContext, params: dict[str, Any]) -> Result:
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "tools/call needs params.name, a tool name")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return failure("Invalid arguments: arguments must be an object")
    definition = tool(name)
    if definition is None:
        return failure(f"Unknown tool: {name}")
    level = agent_level()
    if definition.tier > level:
        return failure(f"Tool {name} needs operations level {int(definition.tier)} "
                       f"({TIER_NAMES[definition.tier]}); the agents' level is {level} "
                       f"({TIER_NAMES[Tier(level)]}).", {"tool": name, "requiredLevel": int(definition.tier),
                                                          "configuredLevel": level})
    try:
        args = check(arguments, definition.input_schema())
    except ArgumentError as error:
        return failure(f"Invalid arguments: {error}", {"field": error.field, "reason": error.reason})
    try:
        if definition.read_only:
            return success(_read(definition, args))
        return _write(definition, args, level)
    except (ProblemError, HTTPException) as error:
        return _raised(error)


def _read(definition: ToolDef, args: dict[str, Any]) -> dict[str, Any]:
    if definition.name == "get_logs":
        service = resolve(ResourceKind.SERVICE, args["service"])
        return tool_reads.get_logs(service, tool_reads.tail_of(args.get("tail")), args.get("since"),
                                   args.get("level"))
    return tool_reads.search(args["query"], args.get("limit"))


def _write(definition: ToolDef, args: dict[str, Any], level: int) -> Result:
    assert definition.call is not None and definition.kind is not None
    kind = definition.kind
    key = "name" if kind is ResourceKind.VOLUME else "id"
    args = {**args, key: resolve(kind, args[key])}
    call = definition.call(args)
    if args.get("dryRun"):
        call = type(call)(call.method, call.path, call.body, call.content_type, {**call.query, "dryRun": "true"})
    answer = tool_dispatch.run(call, tool=definition.name, level=level,
                               answers=None if definition.removal else (kind, args[key]))
    if answer.status >= 400:
        body = answer.body if isinstance(answer.body, dict) else {"title": f"HTTP {answer.status}",
                                                                  "status": answer.status}
        return problem_failure(body)
    if isinstance(answer.body, dict) and answer.body.get("dryRun") is True:
        return success(_plain(answer.body))
    if definition.removal:
        return success({"removed": True})
    if answer.detail is not None:
        return success(_plain(answer.detail))
    body = _plain(answer.body)
    return success(body if isinstance(body, dict) else {"status": answer.status})
