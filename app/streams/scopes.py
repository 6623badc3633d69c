"""Which events a stream URL carries, as scope keys (``app.streams.events``), and the SSE handlers the
negotiated views of lists and details call."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request
from werkzeug.exceptions import NotFound

from app.errors import ProblemError
from app.http.acl_read import require_entry, require_grants
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.streams.events import ALL, ScopeKey, kind_key, object_key, stack_key
from app.streams.findings import RECOMMENDATIONS
from app.streams.response import stream_response

Handler = Callable[..., Response]
TYPE_NAMES = ", ".join(kind.value for kind in ResourceKind)


def types_scopes(value: str | None) -> frozenset[ScopeKey]:
    """``/events?types=service,task``: the kinds kept; absent or blank means all.

    :raises ProblemError: SSE002 for a name that is no event type (letting it match nothing
        would leave a typo silently empty forever; docs/streams.md).
    """
    if value is None or not value.strip():
        return frozenset({ALL})
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    unknown = sorted({name for name in names if name not in {kind.value for kind in ResourceKind}})
    if unknown:
        raise ProblemError("SSE002", detail=f"Unknown event type(s): {', '.join(unknown)[:200]}. "
                                            f"Known: {TYPE_NAMES}.")
    return frozenset(kind_key(ResourceKind(name)) for name in names)


def events_stream(*_args: object, **_kwargs: object) -> Response:
    return stream_response(types_scopes(request.args.get("types")))


def recommendations_stream(*_args: object, **_kwargs: object) -> Response:
    """Findings appearing, changing and disappearing (``app.streams.findings``); 404 when turned off; a
    cluster-wide read (docs/acl.md): 403 ACL001 without any grant, then filtered per finding."""
    if not current_runtime().settings.recommendations:
        raise NotFound("Recommendations are turned off (server.recommendations = false).")
    require_grants()
    return stream_response(frozenset({RECOMMENDATIONS}), replayable=False)


def kind_stream(kind: ResourceKind) -> Handler:
    """A list URL's stream: every event of that kind."""
    scopes = frozenset({kind_key(kind)})

    def handler(*_args: object, **_kwargs: object) -> Response:
        return stream_response(scopes)

    return handler


def object_stream(kind: ResourceKind) -> Handler:
    """A detail URL's stream: that object's events (ref_changed included); for a stack, the stack and all
    its members (services, their tasks, configs, secrets, networks, volumes). 404 when it does not exist,
    403 ACL001 when the caller may not read it (the stream then filters its members per item)."""
    placeholder = kind.spec.id_placeholder

    def handler(*_args: object, **path: str) -> Response:
        object_id = path[placeholder]
        entry = current_runtime().cache.get(kind, object_id)
        if entry is None:
            raise NotFound(f"No {kind.value} {object_id!r}.")
        require_entry(entry)
        scope = stack_key(object_id) if kind is ResourceKind.STACK else object_key(kind, object_id)
        return stream_response(frozenset({scope}))

    return handler
