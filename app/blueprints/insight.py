"""``/search`` (grouped search) and ``/recommendations`` (findings), each as
JSON-LD and as feeds. The work is in ``app.http.search`` and ``app.http.recommendations``
(docs/search-and-recommendations.md)."""

from __future__ import annotations

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors, feed_documented
from app.http import recommendations, search
from app.http.negotiation import negotiated
from app.schemas.v1.insight import RecommendationCollectionV1, RecommendationQueryV1, SearchQueryV1, SearchResultV1
from app.streams.scopes import recommendations_stream

blp = Blueprint("insight", __name__, description="Search across every kind, and recommendation findings.")


@blp.route("/search")
class Search(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": SearchQueryV1}])
    @blp.response(200, SearchResultV1, description="Matches grouped by kind: counts, and the best per kind.")
    @errors(blp, 400, 403, 503, codes={400: "q missing or blank (SEA001), longer than 200 characters (SEA002), "
                                       "bad feed cursor (API012)."})
    @feed_documented(blp)
    @negotiated(atom=search.search_feed)
    def get(self) -> Response:
        return search.search()


@blp.route("/recommendations")
class Recommendations(MethodView):
    @blp.doc(parameters=[{"in": "query", "schema": RecommendationQueryV1}])
    @blp.response(200, RecommendationCollectionV1, description="Current findings, most severe first.")
    @errors(blp, 400, 403, 404, 503, codes={400: "Unknown severity, kind or check, or bad feed cursor (API012).",
                                       404: "Recommendations are turned off (server.recommendations)."})
    @feed_documented(blp, cursor=False)
    @negotiated(sse=recommendations_stream, atom=recommendations.feed)
    def get(self) -> Response:
        return recommendations.collection()
