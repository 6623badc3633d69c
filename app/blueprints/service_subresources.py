"""Service sub-resources ``/services/{id}/<sub>``: GET from the cache, PUT and PATCH as gated writes.

One MethodView per row of ``app.writes.service_spec`` (the table owns shapes, checks, setters, patch styles);
each view is the script of ``app.http.writes`` steps: gate (OPS001), target (SVC003, If-Match), body, the
whole new value checked (nothing reaches the engine unchecked), one versioned update, the answer read back
from the engine. The GET is one object's work (light admission lane); writes wait on the engine (exempt).
"""

from __future__ import annotations

from typing import Any

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.exceptions import NotFound

from app.acl.redact import redact
from app.blueprints.docs import errors, write_documented
from app.cache.entries import Entry
from app.http import admission, writes
from app.http.acl_read import read_filter, require_entry
from app.http.negotiation import negotiated
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.schemas.v1.envelopes import DETAIL_SCHEMAS
from app.writes import service_spec
from app.writes.operations import Operation
from app.writes.service_refs import CacheReferences
from app.writes.service_schemas import ENDPOINT_MODE_BODY, ENDPOINT_MODE_SCHEMA, MODE_BODY, MODE_SCHEMA, VALUE_SCHEMAS
from app.writes.service_spec import SubResource

blp = Blueprint("service_subresources", __name__,
                description="Service sub-resources: read from the cache; PUT and PATCH as gated writes.")
SERVICE = ResourceKind.SERVICE
_NOT_FOUND = {404: "No such service (generic about:blank problem)."}
_JSONLD = {"@context": {"type": "string"}, "@id": {"type": "string"}, "@type": {"type": "string"}}
_ROLLOUT = {"type": "object", "description": "with Prefer: wait=N, the rollout's outcome"}


def _members_schema(sub: SubResource) -> dict[str, Any]:
    if sub.name == "mode":
        return MODE_SCHEMA["properties"]  # type: ignore[no-any-return]
    if sub.name == "endpoint-mode":
        return ENDPOINT_MODE_SCHEMA["properties"]  # type: ignore[no-any-return]
    assert sub.key is not None
    return {sub.key: VALUE_SCHEMAS[sub.name]}


def _envelope_schema(sub: SubResource, *, rollout: bool = False) -> dict[str, Any]:
    members = _members_schema(sub)
    properties = {**_JSONLD, **members, **({"rollout": _ROLLOUT} if rollout else {})}
    return {"type": "object", "properties": properties, "required": ["@context", "@id", "@type", *members]}


def _body_schema(sub: SubResource) -> dict[str, Any]:
    if sub.name == "mode":
        return MODE_BODY
    if sub.name == "endpoint-mode":
        return ENDPOINT_MODE_BODY
    value = VALUE_SCHEMAS[sub.name]
    return {"oneOf": [value, {"type": "object", "properties": {sub.key: value, **_JSONLD}, "required": [sub.key],
                              "description": "enveloped as the GET answers it (JSON-LD members ignored)"}]}


def _lookup(service_id: str) -> Entry:
    entry = current_runtime().cache.get(SERVICE, service_id)
    if entry is None:
        raise NotFound(f"No service {service_id!r}.")
    return entry


def _write(op: Operation, entry: Entry, sub: SubResource, value: Any, service_id: str) -> Response:
    """One versioned update with the checked value; the answer is the sub-resource read back (or the
    service detail for mode / endpoint-mode, docs/writes-services.md)."""
    path = f"/services/{service_id}/{sub.name}"

    def mutate(spec: dict[str, Any]) -> None:
        service_spec.apply(sub, spec, value)

    def answer(fresh: Entry | None, rollout: dict[str, Any] | None) -> Response:
        if fresh is None:
            return writes.no_content()
        members = sub.members(fresh.raw.get("Spec") or {})
        if rollout:
            members["rollout"] = rollout
        return writes.answer_document(path, sub.jsonld_type, members)

    return writes.update_versioned(op, entry, mutate, answer=None if sub.answers_service else answer)


def _register(sub: SubResource) -> None:
    put_name = sub.operations[0]
    patch_name = sub.operations[1] if len(sub.operations) > 1 else None
    returns = DETAIL_SCHEMAS[SERVICE] if sub.answers_service else _envelope_schema(sub, rollout=True)
    styles = {"map": "JSON Patch with the map rules (add/replace/remove/test, one key per path) or a merge patch "
                     "of the map (null deletes)",
              "object": "RFC 6902 JSON Patch over the object or RFC 7396 merge patch (null deletes a member)",
              "list": "RFC 6902 JSON Patch over the list, or a merge patch {\"" + str(sub.key) + "\": [...]} "
                      "(or a bare array) replacing it"}

    class View(MethodView):
        @admission.light   # one object from the cache: the light lane, not behind list requests
        @blp.response(200, _envelope_schema(sub), description=f"The service's {sub.name}, from the cache.")
        @errors(blp, 403, 404, 503, codes=_NOT_FOUND)
        @negotiated()
        def get(self, id: str) -> Response:
            entry, visible = require_entry(_lookup(id)), read_filter()
            raw = entry.raw if visible is None else redact(entry, current_runtime().cache, visible)
            spec = raw.get("Spec") or {}
            return writes.answer_document(f"/services/{id}/{sub.name}", sub.jsonld_type, sub.members(spec))

        @admission.exempt   # waits on the engine
        @write_documented(blp, put_name, body=_body_schema(sub), returns=returns,
                          description=f"Replace the service's {sub.name} (the whole value, bare or enveloped "
                                      "as the GET answers it).")
        def put(self, id: str) -> Response:
            op = writes.begin(put_name)
            entry = writes.target(op, SERVICE, id)
            known = CacheReferences(current_runtime().cache)
            return _write(op, entry, sub, service_spec.put_value(sub, writes.json_body(), known), id)

    view: type[MethodView] = View
    if patch_name is not None:
        patch_operation: str = patch_name
        class PatchableView(View):
            @admission.exempt   # waits on the engine
            @write_documented(blp, patch_operation, body=_body_schema(sub), returns=returns,
                              description=f"Edit the service's {sub.name}: {styles[sub.style]}.")
            def patch(self, id: str) -> Response:
                op = writes.begin(patch_operation)
                entry = writes.target(op, SERVICE, id)
                media, document = writes.patch_body(op)
                known = CacheReferences(current_runtime().cache)
                value = service_spec.patch_value(sub, entry.raw.get("Spec") or {}, media, document, known)
                return _write(op, entry, sub, value, id)

        view = PatchableView
    view.__name__ = view.__qualname__ = sub.jsonld_type
    blp.route(f"/services/<id>/{sub.name}", endpoint=f"service_{sub.name.replace('-', '_')}")(view)


for _sub in service_spec.SUBRESOURCES.values():
    _register(_sub)
