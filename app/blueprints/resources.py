"""List and detail endpoints of the eight resource kinds, made by one factory from ``app.resources``.

The views are thin: parse the query, run the shared pipeline, hand the result to ``respond``. Everything
per-kind (paths, schemas, codes, cross-references) comes from the kind's table row.
"""

from __future__ import annotations

from flask import Response, request
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.exceptions import NotFound

from app.blueprints.docs import errors, feed_documented, list_parameters
from app.cache.entries import Entry
from app.http import admission, history, respond
from app.http.acl_read import read_filter, readable, require_entry
from app.http.conditional import ranged_or_full
from app.http.negotiation import negotiated
from app.query import listing
from app.query.listing import Page
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.schemas.v1.envelopes import COLLECTION_SCHEMAS, DETAIL_SCHEMAS
from app.streams.scopes import kind_stream, object_stream


def _lookup(kind: ResourceKind, object_id: str) -> Entry:
    """A missing resource is a generic 404 (``about:blank``); the per-kind codes
    (``SVC003``...) stay in the registry for write operations."""
    entry = current_runtime().cache.get(kind, object_id)
    if entry is None:
        raise NotFound(f"No {kind.value} {object_id!r}.")
    return entry


def _collection(kind: ResourceKind) -> Response:
    """A list page; ``Range`` under ``If-Range`` is decided in ``app.http.conditional.ranged_or_full``
    (the validator is the ETag of the list without the Range)."""
    cache, keep = current_runtime().cache, read_filter()

    def render(range_header: str | None) -> Response:
        query = listing.parse_list_query(kind, request.args, range_header)
        return respond.collection(kind, listing.run(cache, kind, query, keep))

    return ranged_or_full(render, request.headers.get("Range"), request.headers.get("If-Range"))


def resource_blueprint(kind: ResourceKind) -> Blueprint:
    spec = kind.spec
    blp = Blueprint(spec.plural, f"{__name__}.{kind.value}", url_prefix=spec.path,
                    description=f"{spec.jsonld_type} resources, read from the cache.")
    not_found = {404: f"No such {kind.value} (generic about:blank problem)."}

    @blp.route("")
    class Collection(MethodView):
        @list_parameters(blp)
        @blp.response(200, COLLECTION_SCHEMAS[kind], description=f"A page of {spec.plural}.")
        @errors(blp, 400, 416, 503)
        @feed_documented(blp)
        @negotiated(sse=kind_stream(kind), atom=history.kind_feed(kind))
        def get(self) -> Response:
            return _collection(kind)

    @blp.route(f"/<{spec.id_placeholder}>")
    @admission.light   # one object: waits in the gate's light lane, not behind every list request
    class Detail(MethodView):
        @blp.response(200, DETAIL_SCHEMAS[kind], description=f"One {kind.value} with cross-references.")
        @errors(blp, 403, 404, 503, codes=not_found)
        @feed_documented(blp)
        @negotiated(sse=object_stream(kind), atom=history.object_feed(kind))
        def get(self, **path: str) -> Response:
            return respond.detail(require_entry(_lookup(kind, path[spec.id_placeholder])))

    if kind in (ResourceKind.NODE, ResourceKind.SERVICE):
        @blp.route(f"/<{spec.id_placeholder}>/tasks")
        class Tasks(MethodView):
            @blp.response(200, COLLECTION_SCHEMAS[ResourceKind.TASK],
                          description=f"All tasks of the {kind.value}, enriched, unpaginated.")
            @errors(blp, 403, 404, 503, codes=not_found)
            @negotiated()
            def get(self, **path: str) -> Response:
                entry = require_entry(_lookup(kind, path[spec.id_placeholder]))
                cache = current_runtime().cache
                tasks = list(readable(cache.tasks_of_node(entry.id) if kind is ResourceKind.NODE
                                      else cache.tasks_of_service(entry.id)))
                return respond.collection(ResourceKind.TASK, Page(tasks, len(tasks), len(tasks), 0, False),
                                          paged=False)

    return blp


