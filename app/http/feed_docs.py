"""Feeds in the OpenAPI document: views marked with ``app.blueprints.docs.feed_documented`` get the Atom and
JSON Feed media types on their 200 response (not on a list's 206: a Range selects JSON items) and the feed
parameters they do not list themselves; the JSON Feed schemas join ``components``."""

from __future__ import annotations

import copy
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from app.history.selection import ACTION_DESCRIPTION, ACTION_PATTERN
from app.http.negotiation import ATOM, FEED_JSON
from app.schemas.query_params import lenient_integer_schema

FEED_MARKER = "x-shoal-feed"
_FEEDS = {ATOM: {"schema": {"type": "string", "description": "Atom 1.0 feed (RFC 4287) of history entries"}},
          FEED_JSON: {"schema": {"$ref": "#/components/schemas/JsonFeedV1"}}}
_FEED_PARAMETERS = [
    {"in": "query", "name": "before", "required": False, "schema": {"type": "integer", "minimum": 1},
     "description": "feeds: entries older than this history id (API012 if not digits)"},
    {"in": "query", "name": "limit", "required": False, "schema": lenient_integer_schema(1),
     "description": "entries per page (1..200, default 50; larger values are clamped, invalid ones ignored)"},
    {"in": "query", "name": "action", "required": False, "schema": {"type": "string", "pattern": ACTION_PATTERN},
     "description": ACTION_DESCRIPTION},
]
_REFUSAL = "Feed parameter before not a history id, or action not a list of actions (API012), on every representation."


def document_feeds(document: dict[str, Any]) -> None:
    marked = False
    for operations in document.get("paths", {}).values():
        operation = operations.get("get")
        marker = operation.pop(FEED_MARKER, None) if operation else None
        if operation is None or marker is None:
            continue
        marked = True
        operation["responses"]["200"].setdefault("content", {}).update(copy.deepcopy(_FEEDS))
        if marker.get("cursor"):
            parameters = operation.setdefault("parameters", [])
            named = {p.get("name") for p in parameters}
            parameters += [copy.deepcopy(p) for p in _FEED_PARAMETERS if p["name"] not in named]
            _document_refusal(operation["responses"])
    if marked:
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in _json_feed_schemas().items():
            schemas.setdefault(name, schema)


def _document_refusal(responses: dict[str, Any]) -> None:
    """Every representation refuses a bad feed parameter (``feed_documented``): the 400 says so."""
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemV1"}}}
    refused = responses.setdefault("400", {"description": "", "content": problem})
    refused["description"] = (refused.get("description", "") + " " + _REFUSAL).strip()


def _json_feed_schemas() -> dict[str, Any]:
    from app.schemas.v1.history import JsonFeedV1

    spec = APISpec("feeds", "1", "3.1.0", plugins=[MarshmallowPlugin()])
    spec.components.schema("JsonFeedV1", schema=JsonFeedV1)
    schemas: dict[str, Any] = spec.to_dict()["components"]["schemas"]
    return schemas
