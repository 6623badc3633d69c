"""The body of ``/api``'s page, rendered once per process and query: the hub is not held again.

The reference is ~1 MB of HTML made from the OpenAPI document in ~60 ms of CPU. It depends only on the
document (fixed while the process runs), the base path (fixed too) and ``?q=``, so each distinct ``q`` is
rendered once and kept; at most :data:`KEPT` of them (an operator types a handful), none longer than
:data:`MAX_QUERY` characters (a longer one is rendered and not kept).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from flask import Flask, current_app
from markupsafe import Markup

KEPT = 8
MAX_QUERY = 100
_KEY = "shoal.dashboard.api_reference"


def api_reference(doc: dict[str, Any], q: str) -> Markup:
    kept: OrderedDict[str, Markup] = current_app.extensions[_KEY]
    if q in kept:
        kept.move_to_end(q)
        return kept[q]
    template = current_app.jinja_env.get_template("pages/meta/_reference.html")
    html = Markup(template.render(doc=doc, args={"q": q}, base=current_app.jinja_env.globals.get("base", "")))
    if len(q) <= MAX_QUERY:
        kept[q] = html
        while len(kept) > KEPT:
            kept.popitem(last=False)
    return html


def init_api_reference(app: Flask) -> None:
    app.extensions[_KEY] = OrderedDict()
    app.jinja_env.globals["api_reference"] = api_reference
