"""``/swarm``: the swarm object and its gated writes (docs/swarm-and-plugins.md): settings (merge
patches of orchestration, raft, dispatcher at tier 2; CA and encryption at tier 3), join-token, unlock-key and
CA rotation, unlock, and reading the unlock key (a read gated as a tier-3 write).

Thin views over :mod:`app.engine.swarm`. The swarm is not cached (the engine has no swarm events), so every
view here waits on the engine: the whole blueprint is exempt from the admission gate.
"""

from __future__ import annotations

from typing import Any

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors, write_documented
from app.engine.swarm import SECTIONS, EngineCalls, Section, SwarmEngine, patched_spec
from app.errors import ProblemError
from app.http import admission, respond, writes
from app.http.acl_read import require_grants
from app.http.allow import write_refusal
from app.http.conditional import parse_engine_time
from app.http.jsonld import envelope
from app.http.negotiation import negotiated
from app.resources import ResourceKind
from app.runtime import app_engine, current_runtime
from app.schemas.v1.swarm import SwarmV1, UnlockKeyV1, section_schema
from app.writes import dry_run
from app.writes.operations import operation

blp = Blueprint("swarm", __name__, description="The swarm: settings, rotations, unlock (gated writes).")
admission.exempt(blp)
ENGINE_KEY = "shoal.swarm_engine"
_ENGINE_ERRORS = {501: "The engine is not a swarm manager (SWM001).",
                  503: "The swarm could not be inspected (SWM002), or the engine is unreachable (ENG001)."}

_not_manager = errors(blp, 501, codes=_ENGINE_ERRORS)


def swarm_engine() -> SwarmEngine:
    """One per app, made on first use (inside the worker), with a 5 s timeout (docs/swarm-and-plugins.md)."""
    return app_engine(ENGINE_KEY, SwarmEngine,
                      lambda settings: SwarmEngine(EngineCalls(settings.docker_host, settings.docker_api_version)))


def manager_addr() -> str | None:
    """The leader's address from the cached nodes (else a reachable manager's): where ``docker swarm join``
    goes with a token."""
    fallback = None
    for entry in current_runtime().cache.entries(ResourceKind.NODE):
        status = entry.raw.get("ManagerStatus") or {}
        addr = status.get("Addr")
        if not isinstance(addr, str) or not addr:
            continue
        if status.get("Leader"):
            return addr
        if fallback is None and status.get("Reachability") == "reachable":
            fallback = addr
    return fallback


def may_see_tokens() -> bool:
    """Join tokens are shown to whoever may rotate them: operations level 3 and ACL write on
    ``swarm:cluster``, both checked by ``write_refusal``."""
    return write_refusal(operation("rotate_swarm_token")) is None


@blp.route("/swarm")
class Swarm(MethodView):
    @blp.response(200, SwarmV1, description="The swarm object as the engine has it, and the manager address.")
    @errors(blp, 403, 501, 503, codes=_ENGINE_ERRORS)
    @negotiated()
    def get(self) -> Response:
        require_grants()   # a cluster-wide read: at least one grant
        swarm = swarm_engine().inspect()
        if not may_see_tokens():
            tokens = swarm.get("JoinTokens")
            swarm["JoinTokens"] = {key: "" for key in (tokens if isinstance(tokens, dict) else {})} or {
                "Worker": "", "Manager": ""}
        body = envelope(respond.base_path(), "/swarm", "Swarm")
        body.update(swarm=swarm, managerAddr=manager_addr())
        response = respond.document(body)
        modified = parse_engine_time(str(swarm.get("UpdatedAt") or ""))
        if modified is not None:
            response.last_modified = modified
        return response


# ---------------------------------------------------------------------------------------------- settings
def _patch_section(section: Section) -> Response:
    op = writes.begin(section.operation)
    _, patch = writes.patch_body(op)
    patched_spec({}, section, patch)   # a bad patch is 400 before the engine is asked anything
    engine = swarm_engine()
    version, spec = engine.version_and_spec()
    new, changed = patched_spec(spec, section, patch)
    if dry_run.active():
        return dry_run.swarm_update(op, spec, new)
    if changed:
        writes.engine_write(op, None, None, lambda: engine.update(version, new))
        _, spec = engine.version_and_spec()   # the answer is the engine's state, not a guess
    part = spec.get(section.spec_key)
    return writes.minimal_or(lambda: writes.answer_document(
        section.rule, section.jsonld_type, {section.answer_key: part if isinstance(part, dict) else {}}))


def _section_route(section: Section) -> None:
    properties: dict[str, Any] = {name: {"type": ["integer", "null"], "minimum": 0} for name in section.counters}
    properties.update({name: {"type": ["boolean", "null"]} for name in section.flags})

    class SectionView(MethodView):
        @_not_manager
        @write_documented(blp, section.operation, returns=section_schema(section.answer_key,
                                                                           f"{section.jsonld_type}V1"),
                          body={"type": "object", "properties": properties, "additionalProperties": False},
                          description=f"Merge patch over Swarm.Spec.{section.spec_key} (recognised fields only; "
                                      "0 or null leaves a field unchanged); the answer is that part read back.")
        def patch(self) -> Response:
            return _patch_section(section)

    SectionView.__name__ = SectionView.__qualname__ = section.jsonld_type
    blp.route(section.rule, endpoint=section.jsonld_type)(SectionView)


for _section in SECTIONS.values():
    _section_route(_section)


# ---------------------------------------------------------------------------------------------- rotations
@blp.route("/swarm/rotate-token")
class RotateToken(MethodView):
    @_not_manager
    @write_documented(blp, "rotate_swarm_token", description=(
        "Rotate the worker or manager join token. 400 SWM011 for another target; 500 SWM006 when the engine "
        "fails; 409 SWM012 when the swarm changed meanwhile."), body={
        "type": "object", "required": ["target"], "properties": {"target": {"enum": ["worker", "manager"]}}})
    def post(self) -> Response:
        op = writes.begin("rotate_swarm_token")
        body = writes.json_body(required=False)
        target = body.get("target") if isinstance(body, dict) else None
        if target not in ("worker", "manager"):
            raise ProblemError("SWM011", detail=f"target must be worker or manager, not {target!r}.")
        writes.engine_write(op, None, None, lambda: swarm_engine().rotate_token(str(target)))
        return writes.no_content()


@blp.route("/swarm/rotate-unlock-key")
class RotateUnlockKey(MethodView):
    @_not_manager
    @write_documented(blp, "rotate_swarm_unlock_key", description=(
        "Rotate the managers' unlock key. 409 SWM007 while autolock is off; 500 SWM007 when the engine fails."))
    def post(self) -> Response:
        op = writes.begin("rotate_swarm_unlock_key")
        writes.engine_write(op, None, None, lambda: swarm_engine().rotate_unlock_key())
        return writes.no_content()


@blp.route("/swarm/force-rotate-ca")
class ForceRotateCa(MethodView):
    @_not_manager
    @write_documented(blp, "force_rotate_swarm_ca", description=(
        "Make a new root CA and reissue every node certificate (CAConfig.ForceRotate + 1). The engine does "
        "it in the background: /swarm shows RootRotationInProgress until every node has its new certificate."))
    def post(self) -> Response:
        op = writes.begin("force_rotate_swarm_ca")
        writes.engine_write(op, None, None, lambda: swarm_engine().force_rotate_ca())
        return writes.no_content()


@blp.route("/swarm/unlock")
class Unlock(MethodView):
    @_not_manager
    @write_documented(blp, "unlock_swarm", description=(
        "Unlock a locked manager with its unlock key. 400 SWM010 without unlockKey; SWM008 when the engine "
        "refuses (409 when the swarm is not locked, 400 for a wrong key)."), body={
        "type": "object", "required": ["unlockKey"], "properties": {"unlockKey": {"type": "string"}}})
    def post(self) -> Response:
        op = writes.begin("unlock_swarm")
        body = writes.json_body(required=False)
        key = body.get("unlockKey") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key.strip():
            raise ProblemError("SWM010", detail="The body needs unlockKey, a non-empty string.")
        writes.engine_write(op, None, None, lambda: swarm_engine().unlock(key.strip()))
        return writes.no_content()


@blp.route("/swarm/unlock-key")
class UnlockKey(MethodView):
    @blp.response(200, UnlockKeyV1, description="The managers' current unlock key (Cache-Control: no-store).")
    @errors(blp, 403, 409, 501, 503, codes={
        **_ENGINE_ERRORS, 403: "Operations level 3 (impactful) or higher required (OPS001).",
        409: "Autolock is off: there is no unlock key (SWM009)."})
    @negotiated()
    def get(self) -> Response:
        writes.begin("read_swarm_unlock_key")
        key = swarm_engine().unlock_key()
        return writes.answer_document("/swarm/unlock-key", "SwarmUnlockKey", {"unlockKey": key},
                                      cache_control="no-store")
