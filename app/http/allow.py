"""``Allow`` and ``Accept-Patch`` on GET and HEAD, from the operation table and the same check that gates
the writes (:func:`write_refusal`), so a response never advertises a method the caller would be refused.

The check is the operations level first (403 ``OPS001``), then the ACL write permission on the operation's
key (403 ``ACL002``, reference §1.4): the target comes from the request's URL (the rule's ``<id>``/``<name>``),
so a GET of ``/services/<id>`` and a PUT of ``/services/<id>/scale`` ask about the same object.

``Allow`` lists the methods of the requested URL itself (RFC 9110 §10.2.1): GET and HEAD, plus each write
method of that URL the caller may use now. A method the route has but the table does not know is listed
as routed. ``Accept-Patch`` (RFC 5789 §3.1) appears only when PATCH is allowed there.
"""

from __future__ import annotations

from flask import Response, request

from app.errors import ProblemError
from app.http.acl import current_access, write_target
from app.runtime import current_runtime
from app.writes.operations import METHOD_ORDER, Operation, on_rule, tier_refusal


def write_refusal(op: Operation, view_args: dict[str, str] | None = None) -> ProblemError | None:
    """Why the caller may not perform ``op`` now: the operations level first (OPS001), then the ACL write
    on the operation's key (ACL002). ``view_args`` default to the current request's."""
    level = current_runtime().settings.operations_level
    refusal = tier_refusal(op, level)
    if refusal is not None:
        return ProblemError("OPS001", detail=refusal, extra={"requiredLevel": int(op.tier), "configuredLevel": level})
    access = current_access()
    if access.unrestricted:
        return None
    target = write_target(op, request.view_args if view_args is None else view_args)
    if access.allows_any("write", target.keys):
        return None
    return ProblemError("ACL002", detail=f"write access denied for {target.resource}",
                        extra={"resource": target.resource, "permission": "write"})


def allowed_methods(rule: str, routed: set[str]) -> tuple[list[str], tuple[str, ...]]:
    """(methods for ``Allow``, types for ``Accept-Patch``) of one URL rule for the current caller."""
    writes = {op.method: op for op in on_rule(rule)}
    methods: list[str] = []
    patch_types: tuple[str, ...] = ()
    for method in METHOD_ORDER:
        op = writes.get("GET" if method == "HEAD" else method)   # HEAD goes with GET (a gated read); a
        #                                                          write may be routed by another blueprint
        if method not in routed and op is None and not (method == "HEAD" and "GET" in routed):
            continue
        if op is not None and write_refusal(op) is not None:
            continue
        methods.append(method)
        if method == "PATCH" and op is not None:
            patch_types = op.patch_types
    return methods, patch_types


def add_allow(response: Response) -> None:
    """The after_request part: GET/HEAD answers of routed URLs when no view set Allow, and every successful
    OPTIONS answer, whose Allow (Flask's: every routed method) is replaced by the caller's (app.http.options)."""
    rule = request.url_rule
    if rule is None:
        return
    if request.method == "OPTIONS":
        if response.status_code >= 300:
            return
    elif request.method not in ("GET", "HEAD") or "Allow" in response.headers:
        return
    methods, patch_types = allowed_methods(rule.rule, set(rule.methods or ()))
    response.headers["Allow"] = ", ".join(methods)
    if patch_types:
        response.headers["Accept-Patch"] = ", ".join(patch_types)
