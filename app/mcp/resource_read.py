"""``resources/read``: the JSON text of a ``service://`` URI, built by the code the REST reads run.

Why no serializer here: a detail is ``app.http.respond.detail`` (the same schema, JSON-LD envelope,
cross-references, task enrichment and ACL narrowing as ``GET /<kind>/<id>`` with ``Accept:
application/json``; secrets have no data because the cache never holds it). The static resources are the
REST views themselves, dispatched in a request context of their own URL (``/cluster``, ``/history?limit=100``,
``/recommendations?limit=1000``) that shares the agent's application context, so ``g.identity`` and its
Access apply. The logs URI is the ``get_logs`` tool's ``{lines, cursor}`` of the last 100 lines.

Refusals: a read the ACL refuses (``ACL001``) and an absent object are the same ``resource_not_found``;
another problem (engine unreachable, first sync not done) is an internal error naming its code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Response, current_app
from werkzeug.exceptions import NotFound

from app.cache.entries import Entry
from app.errors import ProblemError
from app.http import respond
from app.http.acl_read import may_read
from app.logs.facility import log_facility
from app.logs.labels import Labeller
from app.logs.page import tool_result
from app.logs.params import LogQuery
from app.logs.reading import read_once
from app.logs.targets import service_target
from app.mcp import uris
from app.mcp.registry import INTERNAL_ERROR, CallContext, RpcError, resource_not_found
from app.runtime import current_runtime

HISTORY_PATH = "/history?limit=100"
RECOMMENDATIONS_PATH = "/recommendations?limit=1000"   # the REST maximum: every current finding
LOG_LINES = 100


def read(ctx: CallContext, uri: object) -> dict[str, Any]:
    """The ``resources/read`` result of ``uri``; hidden and absent alike raise ``resource_not_found``."""
    parsed = uris.parse(uri)
    if parsed is None:
        raise resource_not_found(ctx, str(uri))
    with refusals(ctx, parsed.uri):
        text = static_text(parsed.uri) if parsed.static else object_text(ctx, parsed)
    return {"contents": [{"uri": parsed.uri, "mimeType": uris.MIME, "text": text}]}


@contextmanager
def refusals(ctx: CallContext, uri: str) -> Iterator[None]:
    """REST refusals as JSON-RPC errors: ACL001 and 404 → not found; any other problem → internal error."""
    try:
        yield
    except NotFound:
        raise resource_not_found(ctx, uri) from None
    except ProblemError as exc:
        if exc.code == "ACL001":
            raise resource_not_found(ctx, uri) from None
        raise RpcError(INTERNAL_ERROR, f"{exc.code}: {exc.detail}", {"code": exc.code, "status": exc.status}
                       ) from None


def readable_entry(ctx: CallContext, parsed: uris.Parsed) -> Entry:
    """The object a template URI names, if the caller may read it (else ``resource_not_found``)."""
    assert parsed.kind is not None
    entry = uris.resolve(current_runtime().cache, parsed.kind, parsed.ref)
    if entry is None or not may_read(entry):
        raise resource_not_found(ctx, parsed.uri)
    return entry


def object_text(ctx: CallContext, parsed: uris.Parsed) -> str:
    entry = readable_entry(ctx, parsed)
    if parsed.logs:
        return json.dumps(log_tail(entry), ensure_ascii=False, separators=(",", ":"))
    return respond.detail(entry).get_data(as_text=True)


def log_tail(service: Entry) -> dict[str, Any]:
    """The service's last :data:`LOG_LINES` lines as ``{lines, cursor}`` (one engine read, labelled)."""
    selection = read_once(log_facility().engine, [service_target(service)], LogQuery(limit=LOG_LINES))
    Labeller(current_runtime().cache).label_all(selection.lines)
    return tool_result(selection)


STATIC_PATHS = {uris.CLUSTER: "/cluster", uris.HISTORY: HISTORY_PATH, uris.RECOMMENDATIONS: RECOMMENDATIONS_PATH}


def static_text(uri: str) -> str:
    return rest_body(STATIC_PATHS[uri])


def rest_body(path: str) -> str:
    """The body of the REST view routed at ``path`` (JSON asked for), run in a request context of its own
    that shares the agent's application context (``g.identity``, its Access). Only the view runs: the
    request hooks (authentication, admission) already ran for the agent's own request."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    with app.test_request_context(path, headers={"Accept": "application/json"}):
        response: Response = app.make_response(app.dispatch_request())
    return response.get_data(as_text=True)
