"""``/history``: the change history, newest first, as JSON (cursor paging, filters) and as feeds;
``/history/<id>``: one entry (the ``@id`` of every entry). The work is in ``app.http.history``."""

from __future__ import annotations

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors, feed_documented
from app.http import history
from app.http.negotiation import negotiated
from app.schemas.v1.history import HistoryCollectionV1, HistoryEntryV1, HistoryQueryV1

blp = Blueprint("history", __name__, description="Change history of the cluster, with Atom and JSON Feed.")
_BAD_PARAMETER = {400: "A filter or cursor value is invalid (API012)."}


@blp.route("/history")
class HistoryList(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": HistoryQueryV1}])
    @blp.response(200, HistoryCollectionV1, description="A page of history entries, newest first.")
    @errors(blp, 400, 403, codes=_BAD_PARAMETER)
    @feed_documented(blp, cursor=False)
    @negotiated(atom=history.global_feed)
    def get(self) -> Response:
        return history.collection()


@blp.route("/history/<int:seq>")
class HistoryEntry(MethodView):
    @blp.response(200, HistoryEntryV1, description="One history entry.")
    @errors(blp, 403, 404, codes={404: "Not recorded, or no longer kept by the store (generic about:blank)."})
    @negotiated()
    def get(self, seq: int) -> Response:
        return history.entry_detail(seq)
