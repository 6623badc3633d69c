"""The dashboard's overview at ``/`` (the other pages are the resource URLs themselves: app.dashboard)."""

from __future__ import annotations

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.http.negotiation import html_answer

blp = Blueprint("dashboard", __name__, description="The HTML dashboard shell.")


@blp.route("/")
class Shell(MethodView):
    @blp.response(200, description="The dashboard: the cluster overview.", content_type="text/html")
    def get(self) -> Response:
        return html_answer(None)
