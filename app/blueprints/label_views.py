"""The labels sub-resource of nodes, configs and secrets, as view bodies shared by their blueprints.

GET ``{labels}`` from the cache; PUT (the whole map) and PATCH (JSON Patch or merge patch) through the
versioned update of the object's spec (``writes.update_versioned``): the engine gets the new map with the
cached version index, and the answer is the labels read back from the engine. The rules of the map live
in ``app.writes.labels``.
"""

from __future__ import annotations

from typing import Any

from flask import Response, request
from werkzeug.exceptions import NotFound

from app.cache.entries import Entry
from app.http import respond, writes
from app.http.acl_read import require_entry
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes import labels

TYPES = {ResourceKind.NODE: "NodeLabels", ResourceKind.CONFIG: "ConfigLabels", ResourceKind.SECRET: "SecretLabels"}


def lookup(kind: ResourceKind, object_id: str) -> Entry:
    """A read of a missing object is the generic 404, as for the detail (``app.blueprints.resources``)."""
    entry = current_runtime().cache.get(kind, object_id)
    if entry is None:
        raise NotFound(f"No {kind.value} {object_id!r}.")
    return entry


def _document(entry: Entry) -> dict[str, Any]:
    return {"labels": labels.current(entry.raw)}


def read(kind: ResourceKind, object_id: str) -> Response:
    """The GET: 403 ACL001 when the caller may not read the object."""
    entry = require_entry(lookup(kind, object_id))
    body = writes.answer_document(request.path, TYPES[kind], _document(entry))
    return respond.with_freshness(body)


def _write(op_name: str, kind: ResourceKind, object_id: str, patch: bool) -> Response:
    op = writes.begin(op_name)
    entry = writes.target(op, kind, object_id)
    if patch:
        media, document = writes.patch_body(op)
        new = labels.from_patch(labels.current(entry.raw), media, document)
    else:
        new = labels.from_put(writes.json_body())
    path = request.path

    def answer(fresh: Entry | None, _rollout: dict[str, Any] | None) -> Response:
        if fresh is None:
            return writes.no_content()
        return writes.answer_document(path, TYPES[kind], _document(fresh))

    return writes.update_versioned(op, entry, lambda spec: labels.with_labels(spec, new), answer=answer)


def put(op_name: str, kind: ResourceKind, object_id: str) -> Response:
    return _write(op_name, kind, object_id, patch=False)


def patch(op_name: str, kind: ResourceKind, object_id: str) -> Response:
    return _write(op_name, kind, object_id, patch=True)


BODY = {"type": "object", "additionalProperties": {"type": "string"},
        "description": "The whole label map, bare or as {\"labels\": {...}} (the GET's shape)."}
MERGE = {"type": "object", "additionalProperties": {"type": ["string", "null"]},
         "description": "Merge patch: a string sets the key, null removes it."}
