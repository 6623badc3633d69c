"""The dashboard shell at ``/`` (the SPA itself is not built yet; the shell already links the feed)."""

from __future__ import annotations

from flask import Response, render_template
from flask.views import MethodView
from flask_smorest import Blueprint

blp = Blueprint("dashboard", __name__, description="The HTML dashboard shell.")


@blp.route("/")
class Shell(MethodView):
    @blp.response(200, description="The dashboard shell.", content_type="text/html")
    def get(self) -> Response:
        return Response(render_template("spa.html", feed_path=None), mimetype="text/html")
