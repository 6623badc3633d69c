"""A page: the JSON answer of the page's own URL, rendered by the template named after its endpoint.

Why run the JSON view and decode its body instead of calling the query layer again: the view *is* the
read (query parameters, CEL filter, paging, ACL narrowing, representation version, problems), so the page
cannot drift from what an API client of the same caller gets. Encoding and decoding a 50-row page costs
~1 ms of the budget (bench/bench_dashboard.py). The page carries the body's ETag (the one a JSON GET
issues, remembered for ``If-Match`` like any issued tag) for the write forms.

Templates: ``templates/pages/<blueprint>/<view>.html`` (the endpoint, lower-cased), else
``pages/generic.html``, which shows any document readably. A problem answer renders the same template
with ``problem`` set (a list page shows a filter error beside its filter box) at the problem's status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flask import Response, current_app, g, request
from jinja2 import Template
from werkzeug.exceptions import HTTPException

from app.dashboard.fragments import HEADER, render_blocks, requested_blocks
from app.errors import ProblemError
from app.http.conditional import compute_etag
from app.http.freshness import CONTACT_HEADER, FRESHNESS_HEADER, SEQUENCE_HEADER
from app.http.issued_tags import record_issued
from app.http.negotiation import JSON, json_representation
from app.http.paths import is_resource
from app.runtime import current_runtime

_PROBLEM = "application/problem+json"
TAG_HEADER = "Shoal-Page-Tag"   # the ETag of the JSON answer the page shows


def template_for(endpoint: str | None) -> list[str | Template]:
    """The candidate templates of an endpoint, most specific first."""
    names: list[str | Template] = []
    if endpoint:
        names.append("pages/" + endpoint.replace(".", "/").lower() + ".html")
    names.append("pages/generic.html")
    return names


def _links(response: Response) -> dict[str, str]:
    """rel → target of the answer's Link header (paging: first, prev, next, last)."""
    found: dict[str, str] = {}
    for value in response.headers.getlist("Link"):
        for part in value.split(","):
            target, _, params = part.partition(">")
            rel = params.split('rel="', 1)[-1].split('"', 1)[0] if 'rel="' in params else ""
            if rel and target.strip().startswith("<"):
                found.setdefault(rel, target.strip()[1:])
    return found


def json_answer(view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Response:
    """The view's answer as an API client asking for JSON would get it (problems included)."""
    chosen = g.get("representation")
    g.representation = json_representation()
    try:
        return current_app.make_response(view(*args, **kwargs))
    except (ProblemError, HTTPException) as error:
        return current_app.make_response(current_app.handle_user_exception(error))
    finally:
        g.representation = chosen


def page_context(answer: Response) -> dict[str, Any]:
    """What a page template gets from the JSON answer of its URL."""
    data = answer.get_data()
    mimetype = answer.mimetype or ""
    doc: Any = None
    problem: dict[str, Any] | None = None
    etag = None
    if mimetype == _PROBLEM:
        problem = json.loads(data)
    elif mimetype in (JSON, "application/ld+json") or mimetype.startswith("application/vnd."):
        doc = json.loads(data)
        if answer.status_code in (200, 206):
            etag = compute_etag(data, mimetype)
            record_issued(request, etag)
    return {"doc": doc, "problem": problem, "status": answer.status_code, "etag": etag,
            "links": _links(answer), "args": request.args, "path": request.path,
            "sequence": answer.headers.get(SEQUENCE_HEADER), "contact": answer.headers.get(CONTACT_HEADER),
            "cache_freshness": answer.headers.get(FRESHNESS_HEADER)}


def render_page(template_names: list[str | Template], context: dict[str, Any], *, status: int = 200,
                headers: dict[str, str] | None = None) -> Response:
    """The page, or only the blocks a fragment request names (``Shoal-Fragment``)."""
    template = current_app.jinja_env.get_or_select_template(template_names)
    blocks = requested_blocks(request.headers.get(HEADER))
    if blocks is not None:
        body = render_blocks(template, blocks, context)
    else:
        current_app.update_template_context(context)
        body = template.render(context)
    response = Response(body, status=status, mimetype="text/html")
    response.headers["Cache-Control"] = "no-store" if blocks is not None or context.get("no_store") else "no-cache"
    response.vary.add(HEADER)
    if context.get("etag"):
        response.headers[TAG_HEADER] = context["etag"]   # the script's If-Match after a fragment refresh
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _not_synced() -> Any:
    raise ProblemError("ENG001", detail="The first engine sync has not completed yet.")


def page(view: Callable[..., Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any], *,
         stream: bool, feed: bool) -> Response:
    """The HTML answer of a negotiated GET (``app.http.negotiation``); ``view`` None: a page without a
    JSON answer of its own (the overview, unknown paths: the not-found page)."""
    context: dict[str, Any] = {"doc": None, "problem": None, "status": 200, "etag": None, "links": {},
                               "args": request.args, "path": request.path}
    if view is not None:
        if is_resource(request.path) and not current_runtime().cache.freshness.synced:   # an empty cache is
            #                                                  not an empty cluster (/api does not need it)
            answer = json_answer(_not_synced, (), {})
            answer.headers["Retry-After"] = "1"
        else:
            answer = json_answer(view, args, kwargs)
        context = page_context(answer)
        if answer.headers.get("Cache-Control", "").startswith("no-store"):
            context["no_store"] = True   # a profile, an unlock key: not in the browser's disk cache either
        if stream and (context["problem"] or {}).get("code") == "API002":
            context.update(problem=None, status=200)   # /events only streams: its page is the live log
    context.update(stream_url=request.path if stream else None, feed_path=request.path if feed else None,
                   endpoint=request.endpoint, view_args=request.view_args or {})
    headers = {"Retry-After": "1"} if context["status"] == 503 else {}
    if context.get("cache_freshness"):
        headers[FRESHNESS_HEADER] = context["cache_freshness"]
    return render_page(template_for(request.endpoint), context, status=context["status"], headers=headers)
