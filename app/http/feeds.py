"""Feeds: one page of items rendered as Atom (RFC 4287, built with feedgen) or JSON Feed 1.1.

Any endpoint with a feed hands a ``FeedPage`` to ``feed_response``, which picks the format the request
negotiated (``application/atom+xml`` / ``.atom``, ``application/feed+json`` / ``.feed.json``) and sets the
feed headers: ``Vary: Accept, Authorization, Cookie`` (feeds will differ by caller once ACLs filter them),
``Cache-Control: no-cache``. ETag and the 304 answer come from the shared after_request chain
(``app.http.conditional``), so a body that does not change keeps its ETag: nothing in a feed depends on
the time of the request (the feed's ``updated`` is its newest item's time).

Paging follows RFC 5005: every page carries ``self`` and ``first`` links and, when older items exist,
``next`` (the same URL with ``before`` = the last item's cursor). All pages of one feed share its id. Atom
links are absolute paths (under the base path): readers resolve them against the feed's URL. JSON Feed has
no base URL, so its URLs (``feed_url``, ``home_page_url``, ``next_url``, items' ``url`` and
``external_url``, ``_shoal.first``) are absolute, on ``app.http.links.external_origin`` (``server.external_url``,
else the request as seen through trusted proxies).

History feeds build their pages in ``app.http.history_feeds``; other sources (search results,
recommendation findings) build ``FeedItem``s of their own and call ``feed_response`` the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from feedgen.ext.base import BaseEntryExtension
from feedgen.feed import FeedGenerator
from feedgen.util import xml_elem
from flask import Response, request

from app.cooperate import sliced
from app.http.links import absolute, external_origin
from app.http.negotiation import ATOM, FEED_JSON, current_representation
from app.runtime import current_runtime

JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
FEED_VARY = ("Accept", "Authorization", "Cookie")
AUTHOR = "Shoal"


@dataclass(frozen=True, slots=True)
class FeedItem:
    id: str                        # stable URI, e.g. urn:service:history:<epoch>-<seq>
    title: str
    updated: float                 # wall-clock seconds
    link: str                      # path of the item itself (Atom alternate, JSON Feed url)
    summary: str
    content: str = ""              # plain text body; the summary when empty
    related: str | None = None     # path of what the item is about (Atom related, JSON Feed external_url)
    categories: tuple[str, ...] = ()
    author: str | None = None      # who made the change, when known
    data: dict[str, Any] = field(default_factory=dict)   # the item's JSON form (JSON Feed ``_shoal``)


@dataclass(frozen=True, slots=True)
class FeedPage:
    feed_id: str                   # the same for every page of the feed
    title: str
    self_url: str                  # this page (path and query)
    first_url: str                 # the newest page
    alternate: str                 # what the feed is about (path)
    items: list[FeedItem]          # newest first
    updated: float                 # used when there are no items
    next_url: str | None = None    # the older page, when one exists
    description: str = ""


def page_url(path: str, args: Mapping[str, str], **overrides: str | None) -> str:
    """``path`` with ``args`` as query, some replaced (None removes one); keys keep their order."""
    query = {key: value for key, value in args.items() if key not in overrides}
    query.update({key: value for key, value in overrides.items() if value is not None})
    return path + ("?" + urlencode(query) if query else "")


# Query parameters that page or shape a JSON list but mean nothing to its feed.
_NOT_FEED_PARAMETERS = frozenset({"limit", "offset", "before", "sort", "dir", "search", "filter"})


def feed_query(args: Mapping[str, str]) -> str:
    """The query string of the feed alternate of a JSON response: its selecting parameters (``/history``
    filters, ``/search``'s ``q``) without paging and list shaping; "" when none is left."""
    kept = {key: value for key, value in args.items() if key not in _NOT_FEED_PARAMETERS}
    return "?" + urlencode(kept) if kept else ""


def _datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def _iso(timestamp: float) -> str:
    return _datetime(timestamp).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _EntryLinks(BaseEntryExtension):  # type: ignore[misc]
    """Writes an entry's links: feedgen 1.0 drops the ``rel`` and ``type`` of entry links (its renderer
    shadows the link dict), which would make a ``related`` link read as a second ``alternate``."""

    def __init__(self) -> None:
        self.links: list[tuple[str, str]] = []

    def extend_atom(self, entry: Any) -> Any:
        for href, rel in self.links:
            xml_elem("link", entry, href=href, rel=rel)
        return entry


def render_atom(page: FeedPage) -> bytes:
    feed = FeedGenerator()
    feed.id(page.feed_id)
    feed.title(page.title)
    if page.description:
        feed.subtitle(page.description)
    feed.updated(_datetime(page.items[0].updated if page.items else page.updated))
    feed.author({"name": AUTHOR})
    feed.link(href=page.self_url, rel="self", type=ATOM)
    feed.link(href=page.alternate, rel="alternate")
    feed.link(href=page.first_url, rel="first", type=ATOM)
    if page.next_url is not None:
        feed.link(href=page.next_url, rel="next", type=ATOM)
    def add(item: FeedItem) -> None:
        entry = feed.add_entry(order="append")
        entry.id(item.id)
        entry.title(item.title)
        entry.updated(_datetime(item.updated))
        entry.published(_datetime(item.updated))
        entry.register_extension("shoal_links", _EntryLinks, atom=True, rss=False)
        entry.shoal_links.links = [(item.link, "alternate")] + ([(item.related, "related")] if item.related else [])
        if item.author:
            entry.author({"name": item.author})
        entry.summary(item.summary)
        entry.content(item.content or item.summary, type="text")
        for term in item.categories:
            entry.category(term=term)

    sliced(page.items, add)   # an archive page of 200 entries: the loop gets a turn every few ms
    body: bytes = feed.atom_str(pretty=False)
    return body


def render_json_feed(page: FeedPage, origin: str | None = None) -> bytes:
    """The page as JSON Feed 1.1; its URLs on ``origin`` (scheme and host, see ``external_origin``)."""
    document: dict[str, Any] = {
        "version": JSON_FEED_VERSION, "title": page.title, "home_page_url": absolute(origin, page.alternate),
        "feed_url": absolute(origin, page.self_url),
    }
    if page.next_url is not None:
        document["next_url"] = absolute(origin, page.next_url)
    if page.description:
        document["description"] = page.description
    document["authors"] = [{"name": AUTHOR}]
    document["_shoal"] = {"feedId": page.feed_id, "first": absolute(origin, page.first_url),
                          "updated": _iso(page.items[0].updated if page.items else page.updated)}
    # items encoded one by one in slices, then joined: a heavy page is ~1 MB, one dumps() of it ~25 ms
    encoded: list[str] = []
    sliced(page.items, lambda item: encoded.append(
        json.dumps(_json_item(item, origin), ensure_ascii=False, separators=(",", ":"))))
    document["items"] = []
    head = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return (head[:-3] + "[" + ",".join(encoded) + "]}").encode()


def _json_item(item: FeedItem, origin: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"id": item.id, "url": absolute(origin, item.link)}
    if item.related:
        data["external_url"] = absolute(origin, item.related)
    data.update(title=item.title, summary=item.summary, content_text=item.content or item.summary,
                date_published=_iso(item.updated), date_modified=_iso(item.updated))
    if item.categories:
        data["tags"] = list(item.categories)
    if item.author:
        data["authors"] = [{"name": item.author}]
    data["_shoal"] = item.data
    return data


def feed_response(page: FeedPage) -> Response:
    """The page in the negotiated feed format (JSON Feed when the request asked for it, else Atom)."""
    if current_representation().media == "jsonfeed":
        origin = external_origin(current_runtime().settings, request)
        response = Response(render_json_feed(page, origin), content_type=FEED_JSON)
    else:
        response = Response(render_atom(page), content_type=ATOM + "; charset=utf-8")
    response.headers["Cache-Control"] = "no-cache"
    for name in FEED_VARY:
        response.vary.add(name)
    return response
