"""The change history over HTTP: the ``/history`` collection and entry, and every history feed.

Feeds (Atom and JSON Feed, ``app.http.feeds``) exist on ``/history`` (and ``/events``), on every list URL
(the records of that kind) and every detail URL (the records of that object; a stack's also those of its
members and their tasks). Each page selects at most ``limit`` records (``app.history.selection``) and only
those are turned into entries, so a request costs its page, not the ring. Pages, feeds and ``/history/{id}``
reach past the ring into the store's audit trail (``app.history.archive``: same filters and ACL, read on
the store's thread).

Entry ids are ``urn:service:history:<epoch>-<seq>``: the epoch is when the sequence started (whole seconds,
``Runtime.history_epoch``). The state store (``app.store``) keeps the sequence and its epoch across
restarts (a crash too: committed records keep their ids), so ids stay stable; a new sequence (persistence
off, a fresh or moved-aside store file) has a new epoch and ids above every earlier one, so a reader never
mistakes a new record for one it saw before.

ACL (docs/acl.md): every page and feed holds only records the caller may read, judged per record
(``HistoryFilter.readable``, keys from ``app.http.acl_read.change_keys``); ``/history`` and its feeds need at
least one grant; a detail feed and ``/history/{id}`` of an unreadable object are 403 ``ACL001``. Feed ids
are ``urn:service:feed:<path>`` plus the feed's selecting parameters, the same for every page and across
restarts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from flask import Response, request
from werkzeug.exceptions import NotFound

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.history import entries
from app.history.archive import find, select_all
from app.history.selection import HistoryFilter, Selection, parse_cursor, parse_filter, stack_scope
from app.http import respond
from app.http.acl_read import change_filter, read_filter, require_change, require_entry, require_grants
from app.http.feeds import FeedItem, FeedPage, feed_query, feed_response, page_url
from app.http.jsonld import envelope
from app.http.links import link
from app.http.negotiation import current_representation
from app.resources import ResourceKind
from app.runtime import current_runtime

FeedHandler = Callable[..., Response]
_EXTENSIONS = {"atom": ".atom", "jsonfeed": ".feed.json"}
_VERBS = {Action.CREATE: "created", Action.UPDATE: "updated", Action.REMOVE: "removed",
          Action.REF_CHANGED: "related change"}


# --------------------------------------------------------------------------- JSON
def collection() -> Response:
    """``/history``: a page of entries, newest first, with a ``next`` link when older ones match."""
    require_grants()
    runtime, base = current_runtime(), respond.base_path()
    wanted, cursor = parse_filter(request.args, targets=True), parse_cursor(request.args)
    chosen = select_all(runtime.cache.history, runtime.store, replace(wanted, readable=change_filter()), cursor)
    body = envelope(base, request.path, "Collection")
    visible = read_filter()

    def built(change: Change) -> bytes:
        return respond.encode(entries.entry(change, runtime.cache, base, runtime.audit.of, visible))

    # Built and encoded in slices, the hub let go between them: entries listing many changed fields make a
    # page megabytes of JSON, which one json.dumps would encode in one stretch (docs/history-and-feeds.md).
    items = entries.built_in_slices(chosen.changes, built)
    body.update(items=[], total=len(chosen.changes), limit=cursor.limit, offset=0)
    next_url = _next_url(base + request.path, chosen)
    if next_url is not None:
        body["next"] = next_url
    # "items":[] stands once: inside a string member (a path) its quotes would be escaped
    response = respond.encoded_document(respond.encode(body).replace(
        b'"items":[]', b'"items":[' + b",".join(items) + b"]", 1))
    if next_url is not None:
        response.headers.add("Link", link(next_url, "next"))
    return respond.with_freshness(response)


def entry_detail(seq: int) -> Response:
    runtime = current_runtime()
    change = find(runtime.cache.history, runtime.store, seq)
    if change is None:
        raise NotFound(f"No history entry {seq} (never recorded, or older than the store keeps).")
    require_change(change)
    body = entries.entry(change, runtime.cache, respond.base_path(), runtime.audit.of, read_filter())
    return respond.with_freshness(respond.document(body))


def _next_url(path: str, chosen: Selection) -> str | None:
    if chosen.next_before is None:
        return None
    return page_url(path, request.args, before=str(chosen.next_before))


# --------------------------------------------------------------------------- feeds
def history_feed(*, title: str, wanted: HistoryFilter, alternate: str | None = None, description: str = "",
                 missing: str | None = None) -> Response:
    """A feed of the history records ``wanted`` selects, at the request's URL, paged by ``before``/
    ``limit``. With ``missing``, an empty first page with nothing older is that 404 (a detail feed of an
    object that is gone and whose records left the ring). /search and /recommendations call this (or
    ``feed_response`` with their own items)."""
    runtime, base = current_runtime(), respond.base_path()
    cursor = parse_cursor(request.args)
    chosen = select_all(runtime.cache.history, runtime.store, replace(wanted, readable=change_filter()), cursor)
    if missing is not None and not chosen.changes and chosen.next_before is None and cursor.before is None:
        raise NotFound(missing)
    feed_path = base + request.path + _EXTENSIONS[current_representation().media]
    epoch, feed_id = runtime.history_epoch, "urn:service:feed:" + request.path + feed_query(request.args)
    page = FeedPage(
        feed_id=feed_id,
        title=title, description=description,
        self_url=page_url(feed_path, request.args),
        first_url=page_url(feed_path, request.args, before=None),
        alternate=alternate if alternate is not None else base + request.path,
        items=entries.built_in_slices(chosen.changes, lambda change: _item(
            change, runtime.cache, base, entries.feed_entry_id(feed_id, epoch, change.seq))),
        updated=runtime.started_at,
        next_url=_next_url(feed_path, chosen))
    return respond.with_freshness(feed_response(page))


def _item(change: Change, cache: Cache, base: str, item_id: str) -> FeedItem:
    data = entries.entry(change, cache, base, visible=read_filter())
    kind_name = change.kind.spec.jsonld_type
    lines = [data["summary"]] + [_change_line(c) for c in data.get("changes", ())]
    if data.get("changesOmitted"):
        lines.append(f"… and {data['changesOmitted']} more")
    return FeedItem(
        id=item_id, title=f"{kind_name} {data['name']}: {data['summary']}",
        updated=change.timestamp, link=data["@id"], related=data["resource"], summary=data["summary"],
        content="\n".join(lines), categories=(change.kind.value, change.action.value), data=data)


def _change_line(change: dict[str, Any]) -> str:
    def shown(member: str) -> str:
        return json.dumps(change[member], ensure_ascii=False) if member in change else "(absent)"

    return f"{change['field']}: {shown('old')} → {shown('new')}"


def global_feed(*_view: object) -> Response:
    """``/history`` (and ``/events``) as a feed, with the same filters as the JSON collection."""
    require_grants()
    wanted = parse_filter(request.args, targets=True)
    return history_feed(title="Shoal: change history", wanted=wanted,
                        description="Every change the service saw in the cluster, newest first.")


def kind_feed(kind: ResourceKind) -> FeedHandler:
    """The feed handler of a list URL: that kind's records."""

    def handler(*_view: object, **_path: str) -> Response:
        action = parse_filter(request.args, targets=False).action
        return history_feed(title=f"Shoal: {kind.value} changes", wanted=HistoryFilter(kind=kind, action=action),
                            description=f"Changes of the cluster's {kind.spec.plural}, newest first.")

    return handler


def object_feed(kind: ResourceKind) -> FeedHandler:
    """The feed handler of a detail URL: that object's records; a stack's and its members'."""

    def handler(*_view: object, **path: str) -> Response:
        cache = current_runtime().cache
        object_id = path[kind.spec.id_placeholder]
        action = parse_filter(request.args, targets=False).action
        entry = cache.get(kind, object_id)
        if entry is not None:
            require_entry(entry)
        name = entry.name if entry is not None else object_id
        if kind is ResourceKind.STACK:
            wanted = HistoryFilter(action=action, scope=stack_scope(cache, object_id))
            title = f"Shoal: changes of stack {name} and its members"
        else:
            wanted = HistoryFilter(kind=kind, object_id=object_id, action=action)
            title = f"Shoal: changes of {kind.value} {name}"
        return history_feed(title=title, wanted=wanted,
                            missing=None if entry is not None else f"No {kind.value} {object_id!r}.")

    return handler
