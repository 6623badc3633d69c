"""The shared HTTP layer: every hook and handler that applies to all endpoints, registered once.

Order of work on a response (one ``after_request``): Vary, Allow, discovery and paging Links merged into
one header, then validators and the 304 answer. Request-Id, security headers and request metrics have
their own hooks. Views never set any of these themselves.

No redirect is built from the client's ``Host``: the URL map merges no slashes and has no trailing-slash
rules (werkzeug's redirects for those are absolute, built from ``Host``), and any routing redirect that
still happens is answered with a relative ``Location`` (base path included); HTTPS is never forced by
redirect (with TLS on, the server speaks only TLS).
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from flask import Flask, Response, g, redirect, request
from werkzeug.exceptions import NotFound
from werkzeug.routing import RequestRedirect
from werkzeug.wrappers import Response as WerkzeugResponse

from app.errors import ProblemError
from app.http.allow import add_allow
from app.http.conditional import apply_conditional
from app.http.cors import init_cors
from app.http.csrf import init_csrf
from app.http.exact_names import init_exact_names
from app.http.feeds import feed_query
from app.http.formats import SUFFIX_KEY, requested_format
from app.http.links import discovery_links, link
from app.http.mount import OUTSIDE_KEY
from app.http.negotiation import ATOM, FEED_JSON, html_answer, wants_html
from app.http.paths import is_meta, is_resource
from app.http.problems import init_problems, problem_response
from app.http.request_id import init_request_id
from app.query.paging import RangeNotSatisfiable
from app.runtime import current_runtime


def _relative_redirect() -> WerkzeugResponse | None:
    """werkzeug builds a routing redirect's target from the request's ``Host``: keep only its path (and
    the format extension the shim took off), under the configured base path."""
    exc = request.routing_exception
    if not isinstance(exc, RequestRedirect):
        return None
    target = urlsplit(exc.new_url)
    path = "/" + target.path.lstrip("/")   # werkzeug's target already holds the base path (SCRIPT_NAME)
    suffix = request.environ.get(SUFFIX_KEY)
    location = path + (suffix if isinstance(suffix, str) else "") + (f"?{target.query}" if target.query else "")
    return redirect(location, exc.code)


def _outside_base_path() -> None:
    if request.environ.get(OUTSIDE_KEY):
        raise NotFound(f"This service is served under {current_runtime().settings.base_path}/.")


def _readiness_gate() -> None:
    """Before the first sync a resource read would be a lie: 503 ENG001 (the HTML shell still loads)."""
    if not is_resource(request.path) or current_runtime().cache.freshness.synced:
        return
    if wants_html(request.accept_mimetypes, requested_format(request.environ)):
        return
    raise ProblemError("ENG001", detail="The first engine sync has not completed yet.",
                       headers={"Retry-After": "1"})


_NO_FEED_ALTERNATE = frozenset({"text/html", ATOM, FEED_JSON})   # the feeds themselves, the shell


def _finalize(response: Response) -> Response:
    path = request.path
    if not is_meta(path):
        response.vary.add("Accept")
        base = current_runtime().settings.base_path
        values = [*discovery_links(base), *response.headers.getlist("Link")]
        if g.get("feed_capable") and response.status_code < 400 and response.mimetype not in _NO_FEED_ALTERNATE:
            target = quote(base + path, safe="/!$&'()*+,;=:@-._~")   # header values are ASCII
            query = feed_query(request.args)
            values += [link(target + ".atom" + query, "alternate", ATOM),
                       link(target + ".feed.json" + query, "alternate", FEED_JSON)]
        response.headers["Link"] = ", ".join(values)
    add_allow(response)
    return apply_conditional(request, response)


def _not_found(error: NotFound) -> Response:
    """Unknown paths serve browsers the dashboard's not-found page (200, as the reference says: the HTML app
    answers unmatched paths); others get a 404 problem."""
    if request.url_rule is None and request.method in ("GET", "HEAD") and not request.environ.get(OUTSIDE_KEY) \
            and wants_html(request.accept_mimetypes, requested_format(request.environ)):
        return html_answer(None)
    return problem_response(404, "Not Found", error.description or "Not found.")


def _range_not_satisfiable(error: RangeNotSatisfiable) -> Response:
    total = "*" if error.total is None else str(error.total)
    headers = {"Content-Range": f"items */{total}"} if error.total is not None else {}
    return problem_response(416, "Range Not Satisfiable",
                            "The requested item range is outside the collection or has several parts.",
                            headers=headers)


def init_http(app: Flask) -> None:
    app.url_map.merge_slashes = False
    init_request_id(app)
    init_cors(app)   # before authentication (init_auth): a CORS preflight carries no credentials
    init_csrf(app)   # before authentication: a cross-site write on a cookie session is refused first
    app.before_request(_relative_redirect)
    init_problems(app)
    app.register_error_handler(NotFound, _not_found)
    app.register_error_handler(RangeNotSatisfiable, _range_not_satisfiable)
    app.before_request(_outside_base_path)
    app.before_request(_readiness_gate)
    init_exact_names(app)
    app.after_request(_finalize)
