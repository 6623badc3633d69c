"""The operators' dashboard: server-rendered pages of every resource URL, live over the SSE streams.

A page is the REST answer of its own URL rendered by a Jinja template (``render``): the JSON view runs as
for an API client (same query layer, representation, ACL, paging and problems), its body feeds the
template, so the dashboard never has a serializer or an access check of its own. Scripts only enhance
(``static/js``): one event stream per tab refreshes the page's ``live`` blocks as fragments.
"""

from __future__ import annotations

from flask import Flask

from app.dashboard.api_reference import init_api_reference
from app.dashboard.context import init_context
from app.dashboard.topology_svg import init_topology_svg
from app.http import negotiation


def init_dashboard(app: Flask) -> None:
    from app.dashboard.render import page  # imports the blueprints' helpers lazily (no cycle at import)

    init_context(app)
    init_topology_svg(app)
    init_api_reference(app)
    negotiation.set_html_renderer(page)
