"""flask-smorest's documentation copies (app.blueprints.doc_copies): deep copies that share schemas."""

from __future__ import annotations

import copy

from flask_smorest import arguments, blueprint, etag, pagination, response
from marshmallow import Schema, fields

import app.blueprints  # noqa: F401  (installs the copies)
from app.blueprints.doc_copies import SPINE_DEPTH, copy_doc, copy_spine


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


def test_the_spine_is_copied_and_what_it_holds_shared() -> None:
    resp_doc = {"description": "Not found.", "headers": {"X": {"schema": {"type": "string"}}}}
    doc = {"response": {"responses": {404: [resp_doc]}}, "success_status_codes": [200]}
    copied = copy_spine(doc)
    assert copied == doc
    assert copied["response"]["responses"][404] is not doc["response"]["responses"][404]   # depth 4: copied
    assert copied["response"]["responses"][404][0] is resp_doc                            # depth 5: shared
    copied["response"]["responses"].setdefault(500, []).append({"description": "x"})
    copied["response"]["responses"][404].append({"description": "y"})
    copied["success_status_codes"].append(201)
    assert doc == {"response": {"responses": {404: [resp_doc]}}, "success_status_codes": [200]}
    assert SPINE_DEPTH == 4


def test_stacked_decorators_leave_the_wrapped_functions_document_alone() -> None:
    blp = blueprint.Blueprint("doc_copies_test", __name__)

    def view() -> None:
        return None

    first = blp.alt_response(404, schema=_Thing, description="first")(view)
    before = copy_doc(first._apidoc)  # type: ignore[attr-defined]
    second = blp.arguments(_Thing, location="query")(blp.alt_response(409, description="second")(first))
    third = blp.doc(description="third", responses={"404": {"description": "merged"}})(second)
    assert first._apidoc == before  # type: ignore[attr-defined]
    assert set(third._apidoc["response"]["responses"]) == {404, 409}  # type: ignore[attr-defined]
    assert third._apidoc["manual_doc"]["description"] == "third"  # type: ignore[attr-defined]
    assert "manual_doc" not in first._apidoc  # type: ignore[attr-defined]


def test_flask_smorest_copies_with_them() -> None:
    for module in (arguments, etag, pagination, response):
        assert module.deepcopy is copy_spine  # type: ignore[attr-defined]
    assert blueprint.deepcopy is copy_doc  # type: ignore[attr-defined]
