"""The AsyncAPI 3.0 document of the change streams, served at ``/api/asyncapi.json`` and linked from ``/api``.

Generated from ``app.streams.schemas`` (the event data) and the OpenAPI components (the resources), so the
two documents cannot disagree. One channel per stream address: ``/events``, each list, each detail
(``{id}``/``{name}`` parameters) and stacks; every channel carries the messages its stream can send.
"""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlsplit

from app.resources import ResourceKind
from app.streams import schemas
from app.streams.wire import BATCH_EVENT, SYNC_EVENT

ASYNCAPI_PATH = "/api/asyncapi.json"
ASYNCAPI_ROUTE = "/api/asyncapi"     # the .json extension is taken off before routing (app.http.formats)
_REF = "#/components/schemas/"


def _message(name: str, summary: str) -> dict[str, Any]:
    return {"name": name, "title": name, "summary": summary, "contentType": "application/json",
            "payload": schemas.schema_for_event(name),
            "description": f"SSE `event: {name}`; `id:` is the change sequence number (send it back as "
                          "Last-Event-ID to resume), `data:` one line of JSON."}


def _messages() -> dict[str, Any]:
    messages = {kind.value: _message(kind.value, f"A {kind.value} was created, updated, removed, or something "
                                                 "it cross-references changed.") for kind in ResourceKind}
    messages["recommendation"] = _message("recommendation", "A recommendation finding appeared, changed or "
                                                            "disappeared.")
    messages[BATCH_EVENT] = _message(BATCH_EVENT, "Several events of one batch window.")
    messages[SYNC_EVENT] = _message(SYNC_EVENT, "Replay impossible: refetch, then continue.")
    return messages


def _channel(address: str, description: str, kinds: list[ResourceKind],
             parameter: str | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    names = [kind.value for kind in kinds] + list(extra) + [BATCH_EVENT, SYNC_EVENT]
    channel: dict[str, Any] = {
        "address": address, "description": description,
        "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in names}}
    if parameter is not None:
        channel["parameters"] = {parameter: {"description": f"the object's {parameter}"}}
    return channel


def _channels() -> dict[str, Any]:
    every = list(ResourceKind)
    channels: dict[str, Any] = {"events": _channel(
        "/events", "Every change; `?types=` (comma list of type names) keeps only those types.", every)}
    stack_members = [ResourceKind.STACK, ResourceKind.SERVICE, ResourceKind.TASK, ResourceKind.CONFIG,
                     ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME]
    for kind in ResourceKind:
        spec = kind.spec
        channels[spec.plural] = _channel(spec.path, f"Changes of every {kind.value}.", [kind])
        placeholder = spec.id_placeholder
        if kind is ResourceKind.STACK:
            channels[f"{kind.value}Detail"] = _channel(
                f"{spec.path}/{{{placeholder}}}", "The stack and its members: services, their tasks, configs, "
                "secrets, networks, volumes.", stack_members, placeholder)
        else:
            channels[f"{kind.value}Detail"] = _channel(
                f"{spec.path}/{{{placeholder}}}", f"Changes of one {kind.value}, including ref_changed when "
                "something it cross-references changes.", [kind], placeholder)
    channels["recommendations"] = _channel(
        "/recommendations", "Findings of the recommendation checks appearing, changing and disappearing; "
        "Last-Event-ID always gets sync (refetch /recommendations).", [], extra=("recommendation",))
    return channels


def _referenced(schema: Any, found: set[str]) -> set[str]:
    text = json.dumps(schema)
    names = set()
    start = 0
    while (index := text.find(_REF, start)) >= 0:
        end = text.index('"', index)
        names.add(text[index + len(_REF):end])
        start = end
    return names - found


def _resource_components(openapi_components: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI schemas the events refer to, with everything they refer to in turn."""
    wanted = {schemas.resource_component(kind) for kind in ResourceKind} | {schemas.FINDING_COMPONENT}
    taken: dict[str, Any] = {}
    while wanted:
        name = wanted.pop()
        taken[name] = copy.deepcopy(openapi_components[name])
        wanted |= _referenced(taken[name], set(taken))
    return taken


def asyncapi_document(openapi: dict[str, Any], version: str, base_path: str, origin: str) -> dict[str, Any]:
    """The document as served at ``origin`` (``scheme://host[:port]`` of the request): AsyncAPI wants an
    absolute ``externalDocs.url`` (``format: uri``), unlike OpenAPI, which resolves relative URLs itself."""
    channels = _channels()
    operations = {
        f"receive_{name}": {"action": "receive", "channel": {"$ref": f"#/channels/{name}"},
                            "summary": f"Open with GET {channel['address']} and Accept: text/event-stream.",
                            "messages": [{"$ref": f"#/channels/{name}/messages/{message}"}
                                         for message in channel["messages"]],
                            "bindings": {"http": {"method": "GET"}}}
        for name, channel in channels.items()}
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Shoal change events", "version": version,
            "description": "Server-Sent Events of cluster changes. Each event's id is the change sequence "
                           "number; reconnect with Last-Event-ID (or ?lastEventId=) to get exactly what was "
                           "missed, or a sync event when that is impossible. Idle streams receive the comment "
                           "`:keepalive`; at most 256 streams at once (then 429 SSE001, Retry-After: 5).",
            "externalDocs": {"description": "The HTTP API (OpenAPI)", "url": origin + base_path + "/api"},
        },
        "servers": {"shoal": {"host": "{host}", "protocol": "http", "pathname": base_path or "/",
                              "description": "This service (http or https, as it is served).",
                              "variables": {"host": {"default": urlsplit(origin).netloc or "localhost:9000"}}}},
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": {**schemas.event_components(), **_resource_components(openapi["components"]["schemas"])},
            "messages": _messages(),
        },
    }
