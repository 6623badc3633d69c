"""``/events``: the global change stream (SSE only), and ``/api/asyncapi.json``: the streams' AsyncAPI 3.0
document. The streams of list and detail URLs are routed by their own views (``negotiated(sse=...)``)."""

from __future__ import annotations

from flask import Response, current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors, feed_documented
from app.errors import ProblemError
from app.http import history, respond
from app.http.links import external_origin
from app.http.negotiation import negotiated
from app.openapi import openapi_document
from app.runtime import current_runtime
from app.streams.asyncapi import ASYNCAPI_ROUTE, asyncapi_document
from app.streams.scopes import events_stream
from app.version import VERSION

blp = Blueprint("events", __name__, description="Change events as Server-Sent Events.")
STATIC_CACHE = "public, max-age=3600"


@blp.route("/events")
class Events(MethodView):
    @blp.response(200, description="The change stream (text/event-stream).")
    @errors(blp, 400, 429, codes={400: "Unknown name in types (SSE002).",
                                  429: "Too many event streams (SSE001); see Retry-After."})
    @feed_documented(blp)
    @negotiated(sse=events_stream, atom=history.global_feed)   # /events.atom: the global history feed
    def get(self) -> Response:
        """Only an explicit ``Accept: text/event-stream`` opens the stream (``*/*`` means JSON here, as on
        every URL, and a never-ending body is no default answer): anything else is 406 API002."""
        raise ProblemError("API002", detail="/events only streams: send Accept: text/event-stream.")


@blp.route(ASYNCAPI_ROUTE)
class AsyncApi(MethodView):
    @blp.response(200, description="The AsyncAPI 3.0 document of the change streams.")
    @errors(blp)
    @negotiated()
    def get(self) -> Response:
        settings = current_runtime().settings
        base = settings.base_path
        # AsyncAPI wants absolute URLs (externalDocs): where clients reach us, as for JSON Feed
        origin = external_origin(settings, request) or "http://localhost"
        return respond.document(asyncapi_document(openapi_document(current_app), VERSION, base, origin),
                                content_type="application/json", cache_control=STATIC_CACHE)
