"""JSON Schemas of the event ``data`` objects: the one description the AsyncAPI document is generated from
and the tests validate emitted events against (unit fakes and the live server alike).

The ``resource`` member refers to the same marshmallow schema that dumps it (``detail_schema_for``), by its
OpenAPI component name, so ``/api`` and ``/api/asyncapi.json`` describe one shape.
"""

from __future__ import annotations

from typing import Any

from app.cache.history import Action
from app.resources import ResourceKind
from app.streams.events import resource_schema
from app.streams.wire import BATCH_EVENT, SYNC_DATA, SYNC_EVENT

Schema = dict[str, Any]
ACTIONS = [action.value for action in Action]


def resource_component(kind: ResourceKind) -> str:
    """The OpenAPI component name of the schema that dumps a kind's event resource (apispec names by class)."""
    return type(resource_schema(kind)).__name__


def event_component(kind: ResourceKind) -> str:
    return f"{kind.spec.jsonld_type}Event"


def event_schema(kind: ResourceKind) -> Schema:
    return {
        "type": "object",
        "description": f"One change of a {kind.value}. resource: the object as in its REST detail (stacks: "
                       "as in the collection, member ids); the recorded state, the last known state for "
                       "remove, the current one for ref_changed.",
        "required": ["@id", "@type", "type", "action", "id"],
        "additionalProperties": False,
        "properties": {
            "@id": {"type": "string", "description": "resource path (base path included)",
                    "examples": [f"{kind.spec.path}/abc"]},
            "@type": {"type": "string", "const": kind.spec.jsonld_type},
            "type": {"type": "string", "const": kind.value},
            "action": {"type": "string", "enum": ACTIONS},
            "id": {"type": "string"},
            "resource": {"$ref": f"#/components/schemas/{resource_component(kind)}"},
        },
    }


def batch_schema() -> Schema:
    return {"type": "array", "minItems": 2,
            "description": "Events of one batch window (server.sse.batch_interval), oldest first; the SSE id "
                           "is the highest sequence number among them.",
            "items": {"oneOf": [{"$ref": f"#/components/schemas/{event_component(k)}"} for k in ResourceKind]
                      + [{"$ref": "#/components/schemas/RecommendationEvent"}]}}


def sync_schema() -> Schema:
    return {"type": "object", "additionalProperties": False, "required": list(SYNC_DATA),
            "description": "full_sync: replay is impossible (id older than the history ring, unknown, or the "
                           "client fell behind): refetch, then continue from this event's id.",
            "properties": {"type": {"type": "string", "const": SYNC_DATA["type"]},
                           "action": {"type": "string", "const": SYNC_DATA["action"]},
                           "id": {"type": "string", "const": SYNC_DATA["id"]}}}


FINDING_COMPONENT = "FindingV1"     # the OpenAPI schema of one /recommendations item


def recommendation_schema() -> Schema:
    return {
        "type": "object", "additionalProperties": False,
        "description": "A finding appeared (create), changed (update) or disappeared (remove; resource as last "
                       "reported). Streams of /recommendations only; their Last-Event-ID always gets sync.",
        "required": ["@id", "@type", "type", "action", "id", "resource"],
        "properties": {
            "@id": {"type": "string", "examples": ["/recommendations#no-limits:service:abc"]},
            "@type": {"type": "string", "const": "Finding"},
            "type": {"type": "string", "const": "recommendation"},
            "action": {"type": "string", "enum": ["create", "update", "remove"]},
            "id": {"type": "string"},
            "resource": {"$ref": f"#/components/schemas/{FINDING_COMPONENT}"},
        },
    }


def event_components() -> dict[str, Schema]:
    """The event schemas by component name (resources not included: they come from the OpenAPI components)."""
    components = {event_component(kind): event_schema(kind) for kind in ResourceKind}
    components["RecommendationEvent"] = recommendation_schema()
    components["BatchEvent"] = batch_schema()
    components["SyncEvent"] = sync_schema()
    return components


def schema_for_event(name: str) -> Schema:
    """The schema of the data of an SSE event by its event name (type name, ``batch`` or ``sync``)."""
    if name == BATCH_EVENT:
        return {"$ref": "#/components/schemas/BatchEvent"}
    if name == SYNC_EVENT:
        return {"$ref": "#/components/schemas/SyncEvent"}
    if name == "recommendation":
        return {"$ref": "#/components/schemas/RecommendationEvent"}
    return {"$ref": f"#/components/schemas/{event_component(ResourceKind(name))}"}
