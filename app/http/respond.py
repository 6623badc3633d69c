"""The only place a JSON body is built: schema → JSON-LD envelope → Response with its headers.

Views hand over cache entries (or a plain document); this module applies the negotiated schema version,
the JSON-LD members, the versioned Content-Type, paging (Links, 206/Content-Range), Last-Modified and the
freshness headers. Validators and 304s are added later by the shared after_request chain. Cross-references
and task enrichment are narrowed to what the caller may read (``app.http.acl_read``); the ETag, computed
from the body, therefore differs per visible content.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
from flask import Response, current_app, request

from app.cache.entries import Entry
from app.cache.store import Cache
from app.http.acl_read import read_filter
from app.http.conditional import parse_engine_time
from app.http.encoded_items import EncodedItems, joined_page
from app.http.freshness import freshness_headers
from app.http.jsonld import envelope
from app.http.links import link
from app.http.negotiation import current_representation
from app.http.response_memo import offer
from app.query import representations
from app.query.listing import Page
from app.query.paging import content_range
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.schemas.registry import detail_schema_for, many_schema_for

_ITEMS_KEY = "shoal.encoded_items"


def base_path() -> str:
    return current_runtime().settings.base_path


def encode(body: Any) -> bytes:
    """orjson: the same bytes as the standard library's compact UTF-8 JSON on our documents, 15x faster (a
    page of 200 tasks: 0.34 -> 0.02 ms); what it refuses (an int over 64 bits, a non-string key) goes to the
    standard library."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def document(body: dict[str, Any], *, status: int = 200, content_type: str | None = None,
             cache_control: str = "no-cache") -> Response:
    return encoded_document(encode(body), status=status, content_type=content_type, cache_control=cache_control)


def encoded_document(data: bytes, *, status: int = 200, content_type: str | None = None,
                     cache_control: str = "no-cache") -> Response:
    """A JSON body already encoded (e.g. in parts, yielding between them: ``app.logs.page``)."""
    response = Response(data, status=status, content_type=content_type or current_representation().content_type)
    response.headers["Cache-Control"] = cache_control
    return response


def with_freshness(response: Response) -> Response:
    for name, value in freshness_headers(current_runtime().cache.freshness):
        response.headers[name] = value
    return response


def encoded_items() -> EncodedItems:
    kept = current_app.extensions.get(_ITEMS_KEY)
    if not isinstance(kept, EncodedItems):
        kept = current_app.extensions[_ITEMS_KEY] = EncodedItems()
    return kept


def _framed_item(kind: ResourceKind, data: dict[str, Any], object_id: str, base: str) -> dict[str, Any]:
    return {"@id": base + representations.path_of(kind, object_id), "@type": kind.spec.jsonld_type, **data}


def collection(kind: ResourceKind, page: Page, *, paged: bool = True) -> Response:
    """A collection at the request's own path; ``paged=False`` for the unpaginated task lists of a node
    or service (``limit`` = ``total``), which get no paging Links and ignore Range."""
    cache, base, version = current_runtime().cache, base_path(), current_representation().version
    visible = read_filter()
    head = envelope(base, request.path, "Collection")
    tail = {"total": page.total, "limit": page.limit, "offset": page.offset}
    if visible is None:
        encoded = encoded_items().encoded(cache, kind, page.items, version, base, _framed_item, encode)
        data = joined_page(encode(head), encoded, tail, encode)
    else:
        items = [_framed_item(kind, representations.item(cache, e, visible), e.id, base) for e in page.items]
        data = encode({**head, "items": many_schema_for(kind, version).dump(items), **tail})
    response = encoded_document(data, status=206 if page.partial_range else 200)
    if page.partial_range:
        response.headers["Content-Range"] = content_range(page.offset, len(page.items), page.total)
    placeholder = "{" + kind.spec.id_placeholder + "}"
    response.headers["Link-Template"] = f'<{base}{kind.spec.path}/{placeholder}>; rel="item"'
    if paged:
        response.headers["Accept-Ranges"] = "items"
        for value in _paging_links(page):
            response.headers.add("Link", value)
    offer()
    return with_freshness(response)


def detail(entry: Entry, extra: dict[str, Any] | None = None) -> Response:
    """The detail of ``entry``; ``extra`` members are appended (a write's ``rollout`` outcome)."""
    cache, base, version = current_runtime().cache, base_path(), current_representation().version
    kind = entry.kind
    members = representations.detail(cache, entry, base, read_filter())
    key = kind.spec.detail_key
    members[key] = detail_schema_for(kind, version).dump(_framed_item(kind, members[key], entry.id, base))
    body = envelope(base, representations.path_of(kind, entry.id), kind.spec.jsonld_type)
    body.update(members)
    body.update(extra or {})
    response = document(body)
    modified = last_modified(cache, entry)
    if modified is not None:
        response.last_modified = modified
    if not extra:
        offer()
    return with_freshness(response)


def last_modified(cache: Cache, entry: Entry) -> datetime | None:
    """The latest of the object's own engine time, the cache's latest ``ref_changed`` record for it (its
    embedded tasks, services, names... changed: ``app.cache.refs`` lists what each detail embeds) and
    the app's start (``SHOAL_STARTED_AT``): what changed in embedded parts before this process watched
    is not dated, and a client's date from an earlier process must not earn a 304. A kind without an
    engine time of its own (stacks) gets none: what it embeds is then not dated as a whole."""
    own = parse_engine_time(entry.updated)
    if own is None:
        return None
    started = current_app.config.get("SHOAL_STARTED_AT")
    times = [own] + [datetime.fromtimestamp(t, UTC) for t in (cache.ref_changed_at(entry.kind, entry.id), started)
                     if isinstance(t, (int, float))]
    return max(times)


def _paging_links(page: Page) -> list[str]:
    base_url = base_path() + request.path

    def href(offset: int) -> str:
        args = {k: v for k, v in request.args.items() if k not in ("limit", "offset")}
        args.update(limit=str(page.limit), offset=str(offset))
        return f"{base_url}?{urlencode(args)}"

    links = [link(href(0), "first")]
    if page.offset > 0:
        links.append(link(href(max(0, page.offset - page.limit)), "prev"))
    if page.offset + page.limit < page.total:
        links.append(link(href(page.offset + page.limit), "next"))
    last = (page.total - 1) // page.limit * page.limit if page.total and page.limit else 0
    links.append(link(href(last), "last"))
    return links
