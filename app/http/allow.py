"""``Allow`` and ``Accept-Patch`` on GET and HEAD, from the operation table and the same check that gates
the writes (:func:`write_refusal`), so a response never advertises a method the caller would be refused.

The check is the operations level first (403 ``OPS001``), then the ACL write permission on the operation's
key (403 ``ACL002``, docs/acl.md): the target comes from the request's URL (the rule's ``<id>``/``<name>``),
so a GET of ``/services/<id>`` and a PUT of ``/services/<id>/scale`` ask about the same object.

Two kinds of URL (docs/writes.md, Allow and Accept-Patch):

- a **detail** (``/services/<id>``, ``/nodes/<id>``, ..., ``/plugins/<name>``, ``/swarm``) lists GET and HEAD
  plus the write methods of the object's whole family: its own URL and its sub-resources one segment below
  (``/services/<id>/scale``, ``/services/<id>/env``...). A peer UI decides from the detail's ``Allow`` which
  controls to show (scale, image, env, swarm settings). ``Accept-Patch`` is the union of the patch types of
  the family's allowed PATCH operations;
- any other URL lists its own methods (RFC 9110 §10.2.1); a sub-resource keeps its own ``Allow``.

A method the route has but the table does not know is listed as routed. ``Accept-Patch`` (RFC 5789 §3.1)
appears only when PATCH is allowed. The family per (rule, level) is computed once (:func:`_family`); per
request only the ACL check runs, once per distinct write target, so a detail read costs a few dict hits more.
"""

from __future__ import annotations

from functools import cache

from flask import Response, request

from app.errors import ProblemError
from app.http.acl import current_access, write_target
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import METHOD_ORDER, OPERATIONS, Operation, on_rule, plain_rule, tier_refusal

# The detail URL rules whose Allow is the family's: one per cached kind, plus plugins and the swarm.
DETAIL_RULES: frozenset[str] = frozenset(
    [f"{kind.spec.path}/<{kind.spec.id_placeholder}>" for kind in ResourceKind] + ["/plugins/<name>", "/swarm"])


def write_refusal(op: Operation, view_args: dict[str, str] | None = None) -> ProblemError | None:
    """Why the caller may not perform ``op`` now: the operations level first (OPS001), then the ACL write
    on the operation's key (ACL002). ``view_args`` default to the current request's."""
    level = current_runtime().settings.operations_level
    refusal = tier_refusal(op, level)
    if refusal is not None:
        return ProblemError("OPS001", detail=refusal, extra={"requiredLevel": int(op.tier), "configuredLevel": level})
    return acl_refusal(op, view_args)


def acl_refusal(op: Operation, view_args: dict[str, str] | None = None) -> ProblemError | None:
    """The ACL half of :func:`write_refusal`: 403 ``ACL002`` when the caller may not write ``op``'s target."""
    access = current_access()
    if access.unrestricted:
        return None
    target = write_target(op, request.view_args if view_args is None else view_args)
    if access.allows_any("write", target.keys):
        return None
    return ProblemError("ACL002", detail=f"write access denied for {target.resource}",
                        extra={"resource": target.resource, "permission": "write"})


def _is_member(detail: str, rule: str) -> bool:
    """``rule`` is ``detail`` itself or a sub-resource one static segment below it."""
    if rule == detail:
        return True
    rest = rule.removeprefix(detail + "/")
    return rest != rule and "/" not in rest and "<" not in rest


@cache
def _family(detail: str, level: int) -> tuple[tuple[tuple[str, Operation], ...], tuple[str, ...]]:
    """((write method, one operation of that method the level lets through), patch types) of a detail's
    family at ``level``. The table is fixed at import, so this is computed once per (rule, level)."""
    chosen: dict[str, Operation] = {}
    patch_types: list[str] = []
    for op in OPERATIONS.values():
        if op.method == "GET" or not _is_member(detail, op.rule) or tier_refusal(op, level) is not None:
            continue
        chosen.setdefault(op.method, op)
        if op.method == "PATCH":
            patch_types.extend(t for t in op.patch_types if t not in patch_types)
    methods = tuple((method, chosen[method]) for method in METHOD_ORDER if method in chosen)
    return methods, tuple(patch_types)


def detail_methods(rule: str, routed: set[str]) -> tuple[list[str], tuple[str, ...]]:
    """(methods for ``Allow``, types for ``Accept-Patch``) of a detail URL: GET, HEAD (and any routed method
    the table does not know) plus the family's write methods whose ACL check passes. Every member of a
    family shares the detail's target, so the ACL is asked once per distinct target type."""
    family, patch_types = _family(rule, current_runtime().settings.operations_level)
    writes = dict(family)
    verdicts: dict[str, bool] = {}
    methods: list[str] = []
    for method in METHOD_ORDER:
        op = writes.get(method)
        if op is None:
            if method in ("GET", "HEAD") or (method in routed and all(o.method != method for o in on_rule(rule))):
                methods.append(method)
            continue
        allowed = verdicts.get(op.target)
        if allowed is None:
            allowed = verdicts[op.target] = acl_refusal(op) is None
        if allowed:
            methods.append(method)
    return methods, (patch_types if "PATCH" in methods else ())


def allowed_methods(rule: str, routed: set[str]) -> tuple[list[str], tuple[str, ...]]:
    """(methods for ``Allow``, types for ``Accept-Patch``) of one URL rule for the current caller."""
    if plain_rule(rule) in DETAIL_RULES:
        return detail_methods(plain_rule(rule), routed)
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
