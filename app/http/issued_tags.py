"""The entity tags this worker issued for objects, each with the state of the object it showed: what
``If-Match`` on a write is judged by.

Why: an ETag is the SHA-256 of a body, and a body may embed more than the object a write changes (a
service's detail embeds its tasks), so the tag of a GET changes while the object itself does not. ``If-Match``
asks "is the object I read still the one I would change?". So whenever a GET (or a write's answer) of a
writable object's URL issues a tag, the tag is remembered with the object it showed (kind and id) and a
digest of the object's written state (its ``Spec``, or the whole engine document for kinds without one);
a later ``If-Match`` holds when that digest is still the object's. A tag the worker no longer remembers
(after a restart, or evicted) holds only when it is still the detail's current tag (``app.http.writes``).

Bounded: at most :data:`MAX_TAGS` tags, least recently issued dropped first; tags and ids longer than
:data:`MAX_TEXT` characters are not remembered, so the registry holds at most ~2 MB.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass

from flask import Flask, Request, current_app

from app.cache.entries import Entry
from app.resources import ResourceKind
from app.runtime import current_runtime
from app.writes.operations import on_rule

MAX_TAGS = 4096
MAX_TEXT = 160
_EXTENSION = "shoal.issued_tags"
_CACHED = {kind.value: kind for kind in ResourceKind}


@dataclass(frozen=True, slots=True)
class Shown:
    """What one issued tag showed: the object and the digest of its written state then."""

    kind: ResourceKind
    object_id: str
    state: bytes


def state_digest(entry: Entry) -> bytes:
    """A digest of what writes change: the ``Spec`` (a service's tasks, status and version are not part of
    it), or the whole engine document of kinds without one (networks, volumes, stacks)."""
    spec = entry.raw.get("Spec")
    state = spec if isinstance(spec, dict) else entry.raw
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).digest()[:16]


class IssuedTags:
    """Tag → :class:`Shown`, least recently issued first out."""

    def __init__(self, limit: int = MAX_TAGS) -> None:
        self._limit = limit
        self._shown: OrderedDict[str, Shown] = OrderedDict()

    def __len__(self) -> int:
        return len(self._shown)

    def remember(self, tag: str, entry: Entry) -> None:
        if len(tag) > MAX_TEXT or len(entry.id) > MAX_TEXT:
            return
        self._shown[tag] = Shown(entry.kind, entry.id, state_digest(entry))
        self._shown.move_to_end(tag)
        while len(self._shown) > self._limit:
            self._shown.popitem(last=False)

    def reissue(self, tag: str, entry: Entry) -> None:
        """The same tag served again (``app.http.response_memo``): most recently issued once more, its
        digest made again only if it was dropped meanwhile."""
        if tag in self._shown:
            self._shown.move_to_end(tag)
        else:
            self.remember(tag, entry)

    def shows_current(self, tag: str, entry: Entry) -> bool:
        """Whether ``tag`` was issued for this object in the state it is in now."""
        shown = self._shown.get(tag)
        return (shown is not None and shown.kind is entry.kind and shown.object_id == entry.id
                and shown.state == state_digest(entry))


def issued_tags(app: Flask | None = None) -> IssuedTags:
    extensions = (app or current_app).extensions
    registry = extensions.get(_EXTENSION)
    if not isinstance(registry, IssuedTags):
        registry = extensions[_EXTENSION] = IssuedTags()
    return registry


def written_object(request: Request) -> Entry | None:
    """The cached object a write to the request's URL would change, if the URL has writes (a detail, a
    service sub-resource, a labels or role document); None for other URLs (lists, logs, the swarm...)."""
    rule = request.url_rule
    if rule is None or not request.view_args:
        return None
    targets = {op.target for op in on_rule(rule.rule)}
    if len(targets) != 1:
        return None
    kind = _CACHED.get(targets.pop())
    value = next(iter(request.view_args.values()))
    if kind is None or not isinstance(value, str):
        return None
    return current_runtime().cache.get(kind, value)


def record_issued(request: Request, tag: str) -> None:
    """Remember ``tag`` when the request's URL is a writable object's (called for every tag issued)."""
    entry = written_object(request)
    if entry is not None:
        issued_tags().remember(tag, entry)


def remember_for(entry: Entry, tag: str) -> None:
    """Remember the tag of a write's answer (the object's detail, read back)."""
    issued_tags().remember(tag, entry)
