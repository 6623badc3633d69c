"""Encode once, per item: each list item's JSON is kept until its entry, or what the item shows of other
objects, changes; a page is the join of its items' bytes.

Why: a page of 200 tasks spent 70 % of its 4.5 ms in the schema's dump, for items that were the same as
on the previous page served. An item is the entry's engine object (entries are replaced, never mutated, on
a change: the identity of the entry says whether it changed) plus the fields ``app.query.representations``
derives from other objects (a task's service and node names, a service's running tasks): those are made
again per request (a few dict reads) and compared. Only unrestricted readers' items are kept (a restricted
reader's item is redacted per grants); the dump and the bytes are the same code as before
(``schema_for(kind, version)``, :func:`app.http.respond.encode`).

Bounded: an item per cached object at most, in practice (about 1 KB a task); the items of removed objects
(a crash-looping service makes new tasks all day) are dropped with all the others when more items are kept
than twice the cache's objects (plus :data:`SLACK`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.cache.entries import Entry
from app.cache.store import Cache
from app.query import representations
from app.resources import ResourceKind
from app.schemas.registry import schema_for

SLACK = 1024
_DERIVED = ("RunningTasks", "ServiceName", "NodeHostname")   # what representations.item adds from others

Encoder = Callable[[Any], bytes]
Framer = Callable[[ResourceKind, dict[str, Any], str, str], dict[str, Any]]


class EncodedItems:
    def __init__(self) -> None:
        self._kept: dict[tuple[ResourceKind, str, int, str], tuple[Entry, tuple[Any, ...], bytes]] = {}
        self._limit = SLACK

    def __len__(self) -> int:
        return len(self._kept)

    def encoded(self, cache: Cache, kind: ResourceKind, entries: Sequence[Entry], version: int, base: str,
                frame: Framer, encode: Encoder) -> list[bytes]:
        schema = schema_for(kind, version)
        kept = self._kept
        out = []
        for entry in entries:
            data = representations.item(cache, entry, None)
            derived = tuple(data.get(name) for name in _DERIVED)
            key = (kind, entry.id, version, base)
            found = kept.get(key)
            if found is not None and found[0] is entry and found[1] == derived:
                out.append(found[2])
                continue
            blob = encode(schema.dump(frame(kind, data, entry.id, base)))
            if len(kept) >= self._limit:
                self._limit = 2 * sum(cache.count(k) for k in ResourceKind) + SLACK
                if len(kept) >= self._limit:
                    kept.clear()
            kept[key] = (entry, derived, blob)
            out.append(blob)
        return out


def joined_page(head: bytes, items: list[bytes], tail: dict[str, Any], encode: Encoder) -> bytes:
    """``head`` (an encoded JSON object) with ``"items": [...]`` and the members of ``tail`` appended, in
    that order: the same bytes as encoding the whole document at once."""
    rest = encode(tail)
    opening = head[:-1] + b',"items":[' if len(head) > 2 else b'{"items":['
    return b"".join((opening, b",".join(items), b"]", b"," + rest[1:] if len(rest) > 2 else b"}"))
