"""/search over HTTP: the grouped JSON-LD result (``app.query.search``) and its feed.

The feed (``/search.atom?q=``, JSON Feed alike) is the history feed of the records
whose object name contains ``q``, paged by ``before``/``limit`` like every history feed
(docs/search-and-recommendations.md).
"""

from __future__ import annotations

from flask import Response, request

from app.cache.history import Change
from app.errors import ProblemError
from app.history.selection import HistoryFilter, parse_filter
from app.http import respond
from app.http.acl_read import read_filter, require_grants
from app.http.feeds import page_url
from app.http.history import history_feed
from app.http.jsonld import envelope
from app.query.search import parse_search_query, result_members
from app.runtime import current_runtime


def require_synced() -> None:
    """Before the first engine sync, cluster reads answer 503 ENG001 (empty would lie)."""
    if not current_runtime().cache.freshness.synced:
        raise ProblemError("ENG001", detail="The first engine sync has not completed yet.",
                           headers={"Retry-After": "1"})


def search() -> Response:
    """Counts and results of readable objects only; with a policy, at least one grant."""
    query = parse_search_query(request.args)
    require_synced()
    require_grants()
    runtime, base, keep = current_runtime(), respond.base_path(), read_filter()
    results = runtime.search.search(query, keep)
    body = envelope(base, "/search", "SearchResult")
    body.update(result_members(runtime.cache, query, results, base, keep))
    return respond.with_freshness(respond.document(body))


def search_feed(*_view: object) -> Response:
    query = parse_search_query(request.args)
    require_synced()
    require_grants()
    text = query.text

    def named(change: Change) -> bool:
        return text in change.name.lower()

    alternate = page_url(respond.base_path() + "/search", {"q": query.original})
    return history_feed(title=f"Shoal: changes of objects named like {query.original!r}",
                        wanted=HistoryFilter(action=parse_filter(request.args, targets=False).action, scope=named),
                        alternate=alternate,
                        description=f"Change history of the objects whose name contains {query.original!r}.")
