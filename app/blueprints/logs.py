"""``/services/{id}/logs``, ``/tasks/{id}/logs``, ``/stacks/{name}/logs``: JSON page, live tail, text.

Thin views: the work is in ``app.logs`` (parameters, pages, tails) and ``app.engine.logs`` (engine calls).
Every view waits on the engine, so none holds the admission gate (``admission.exempt``). ACL: a service's
or task's logs need read on it (403 ``ACL001``); a stack's merge only its readable services (none: 403).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Response, request
from flask.blueprints import BlueprintSetupState
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors
from app.http import admission
from app.http.acl_read import denied, read_filter, require_entry
from app.http.negotiation import negotiated
from app.logs import responses
from app.logs.facility import init_logs
from app.logs.schemas import LogArgsV1, LogResponseV1
from app.logs.targets import service_targets, stack_targets, task_targets
from app.runtime import current_runtime

blp = Blueprint("logs", __name__, description="Service, task and stack logs: JSON page, live tail (SSE), text.")
F = TypeVar("F", bound=Callable[..., Any])

_CONTENT = {
    "text/event-stream": {"schema": {"type": "string", "description": "live tail: one event per line, no event "
                                     "name, id: <line timestamp>, data: <LogLine JSON>"}},
    "text/plain": {"schema": {"type": "string", "description": "<timestamp> <service>.<slot> <stream> <message>"}},
}
_CODES = {
    400: "stream not stdout/stderr (LOG002), bad after/since (LOG003), bad before (LOG004), before on a live "
         "stream (LOG005).",
    404: "No such service, task or stack (generic about:blank problem).",
    403: "Read access denied by the ACL policy (ACL001).",
    429: "Too many log streams (LOG001), with Retry-After: 5.",
    500: "Engine log read failed (LOG006), frames unparsable (LOG007), live stream not opened (LOG008).",
}


@blp.record_once
def _init(state: BlueprintSetupState) -> None:
    init_logs(state.app)  # type: ignore[arg-type]  # registered on a Flask app, typed as sansio App


def documented(what: str) -> Callable[[F], F]:
    def decorate(view: F) -> F:
        view = blp.doc(parameters=[{"in": "query", "schema": LogArgsV1},
                                   {"in": "header", "name": "Last-Event-ID", "required": False,
                                    "schema": {"type": "string"},
                                    "description": "live tail: start after this line timestamp"}],
                       responses={"200": {"description": f"The {what}'s logs.", "content": {
                           "application/json": {"schema": LogResponseV1}, **_CONTENT}}})(view)
        view = errors(blp, 400, 403, 404, 429, 503, codes=_CODES)(view)
        return blp.response(200, LogResponseV1, description=f"The {what}'s logs.")(view)  # type: ignore[no-any-return]
    return decorate


def serve(targets_of: responses.TargetsOf, filename: str) -> Response:
    """Plain text when asked for; else JSON, SSE, or the dashboard (406 for Atom and the rest)."""
    if responses.wants_text(request.accept_mimetypes):
        return responses.text_download(targets_of, filename)
    view: Callable[[], Response] = negotiated(sse=lambda: responses.live_tail(targets_of))(
        lambda: responses.json_page(targets_of))
    return view()


@blp.route("/services/<service_id>/logs")
@admission.exempt
class ServiceLogs(MethodView):
    @documented("service")
    def get(self, service_id: str) -> Response:
        return serve(lambda: service_targets(current_runtime().cache, service_id, require_entry),
                     f"service-{service_id}")


@blp.route("/tasks/<task_id>/logs")
@admission.exempt
class TaskLogs(MethodView):
    @documented("task")
    def get(self, task_id: str) -> Response:
        return serve(lambda: task_targets(current_runtime().cache, task_id, require_entry), f"task-{task_id}")


@blp.route("/stacks/<name>/logs")
@admission.exempt
class StackLogs(MethodView):
    @documented("stack (all its services, merged by timestamp)")
    def get(self, name: str) -> Response:
        return serve(lambda: stack_targets(current_runtime().cache, name, read_filter(),
                                           lambda stack: denied(f"stack:{stack.name}")), f"stack-{name}")
