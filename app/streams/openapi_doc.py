"""What ``/api`` says about streams: ``text/event-stream`` on every stream URL, its request headers, the
429 of the cap, and a link to the AsyncAPI document (``externalDocs`` and ``x-asyncapi``)."""

from __future__ import annotations

import copy
from typing import Any

from app.resources import ResourceKind
from app.streams.asyncapi import ASYNCAPI_PATH, ASYNCAPI_ROUTE

_STREAM = {"text/event-stream": {"schema": {
    "type": "string", "description": "Server-Sent Events; event names, data and ids: see the AsyncAPI document "
                                     f"at {ASYNCAPI_PATH}"}}}
_PARAMETERS = [
    {"in": "header", "name": "Last-Event-ID", "required": False, "schema": {"type": "string"},
     "description": "streams: resume after this event id (replay of what was missed, or a sync event)"},
    {"in": "query", "name": "lastEventId", "required": False, "schema": {"type": "string"},
     "description": "streams: Last-Event-ID for clients that cannot set headers"},
]
_CAP = {"description": "Too many event streams (SSE001), with Retry-After: 5.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemV1"}}}}


def stream_paths() -> set[str]:
    paths = {"/events", "/recommendations"}
    for kind in ResourceKind:
        paths |= {kind.spec.path, f"{kind.spec.path}/{{{kind.spec.id_placeholder}}}"}
    return paths


def document_streams(document: dict[str, Any], base_path: str) -> None:
    document["externalDocs"] = {"description": "Change events (Server-Sent Events): AsyncAPI 3.0 document",
                                "url": base_path + ASYNCAPI_PATH}
    document["x-asyncapi"] = base_path + ASYNCAPI_PATH
    asyncapi = document.get("paths", {}).get(ASYNCAPI_ROUTE, {}).get("get")
    if asyncapi is not None:
        content = asyncapi.setdefault("responses", {}).setdefault("200", {"description": "OK"}) \
            .setdefault("content", {})
        content["application/json"] = {"schema": {"type": "object", "description": "AsyncAPI 3.0.0 document"}}
    for path in stream_paths():
        operation = document.get("paths", {}).get(path, {}).get("get")
        if operation is None:
            continue
        responses = operation.setdefault("responses", {})
        content = responses.setdefault("200", {"description": "OK"}).setdefault("content", {})
        if path == "/events":   # stream-only: no JSON body exists (406 API002)
            for media in [m for m in content if "json" in m]:
                del content[media]
            types = {"in": "query", "name": "types", "required": False, "schema": {"type": "string"},
                     "description": "comma list of " + ", ".join(k.value for k in ResourceKind)
                                    + "; an unknown name is 400 SSE002"}
            operation.setdefault("parameters", []).append(types)
        content.update(copy.deepcopy(_STREAM))
        responses.setdefault("429", copy.deepcopy(_CAP))
        operation.setdefault("parameters", []).extend(copy.deepcopy(_PARAMETERS))
