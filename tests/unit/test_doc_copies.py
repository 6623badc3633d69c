"""flask-smorest's documentation copies (app.blueprints.doc_copies): deep copies that share schemas."""

from __future__ import annotations

import copy

from flask_smorest import arguments, blueprint, etag, pagination, response
from marshmallow import Schema, fields

import app.blueprints  # noqa: F401  (installs the copies)
from app.blueprints.doc_copies import copy_doc


class _Thing(Schema):
    name = fields.String()


def test_schemas_are_shared_and_containers_copied() -> None:
    schema = _Thing()
    inner = {"type": "string"}
    doc = {"response": {"responses": {200: [{"schema": schema, "headers": inner, "also": inner}]}},
           "tuple": (1, [2]), "set": {3}}
    copied = copy_doc(doc)
    assert copied == doc
    entry = copied["response"]["responses"][200][0]
    assert entry["schema"] is schema
    assert entry["headers"] is not inner and entry["headers"] == inner
    assert entry["headers"] is entry["also"]            # aliases stay aliased, as with copy.deepcopy
    assert copied["tuple"][1] is not doc["tuple"][1]
    assert copied["set"] is not doc["set"]
    entry["headers"]["type"] = "integer"
    assert inner == {"type": "string"}


def test_a_copy_equals_the_deepcopy_but_for_schema_identity() -> None:
    doc = {"a": [{"b": ("c", 1, 2.5, None, True)}], "schema": _Thing}
    assert copy_doc(doc) == copy.deepcopy(doc)
    assert copy_doc(doc)["schema"] is _Thing


def test_flask_smorest_copies_with_it() -> None:
    for module in (arguments, blueprint, etag, pagination, response):
        assert module.deepcopy is copy_doc  # type: ignore[attr-defined]
