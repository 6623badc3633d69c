"""History entries (docs/history-and-feeds.md, with a diff and an audit slot) built from change records.

An entry is computed when a page is served, from one record and the current cache (for display names),
so the cost follows the page size, never the ring's. Shape::

    {"@id": "/history/1042", "@type": "HistoryEntry", "id": 1042, "timestamp": "2026-…Z",
     "type": "service", "action": "update", "resourceId": "abc", "name": "web",
     "resource": "/services/abc", "summary": "replicas 2→3", "changes": [{field, old?, new?}],
     "changesOmitted"?: 3, "audit": null}

``changes`` is present on updates only (creates and removes would repeat the whole object; ref_changed
records carry no objects). ``audit`` is ``{identity, requestId}`` for changes made through this service's
own write endpoints (``app.writes.audit``), else null.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from app.acl.redact import Visible, redact_raw
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.cooperate import sliced
from app.history import diff, summary
from app.resources import ResourceKind

Data = dict[str, Any]
ENTRY_TYPE = "HistoryEntry"
T = TypeVar("T")
# A page of 200 records the memo has not seen (an archive page, deep in the file) costs 50-150 ms of diffs:
# built in slices of this many seconds, the hub let go between them (docs/figures.md).
SLICE_SECONDS = 0.004


def entry_path(seq: int) -> str:
    return f"/history/{seq}"


def resource_path(change: Change) -> str:
    return f"{change.kind.spec.path}/{change.id}"


HISTORY_FEED_ID = "urn:service:feed:/history"


def feed_entry_id(feed_id: str, epoch: int, seq: int) -> str:
    """An entry's id in one feed: ``urn:service:history:<epoch>-<seq>`` in the unfiltered ``/history`` feed
    (the canonical form, with the sequence's epoch), ``<feed id>#<epoch>-<seq>`` in every other feed.
    Readers such as newsboat key articles by id across all their subscriptions: with one id per record
    everywhere, a per-service feed beside ``/history.atom`` would show as read and empty. Stable
    across restarts: the feed id, the epoch and the number all are."""
    if feed_id == HISTORY_FEED_ID:
        return f"urn:service:history:{epoch}-{seq}"
    return f"{feed_id}#{epoch}-{seq}"


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def display_name(change: Change, cache: Cache) -> str:
    """A task is named ``<service>.<slot>`` (``<service>.<node id>`` when global), as in its detail; the
    service's current name is used when it is still cached, else its id. Others keep the record's name."""
    if change.kind is not ResourceKind.TASK:
        return change.name
    raw = change.after or change.before
    if raw is None:
        entry = cache.get(ResourceKind.TASK, change.id)
        raw = entry.raw if entry is not None else None
    if raw is None:
        return change.name
    service_id = str(raw.get("ServiceID") or "")
    service = cache.get(ResourceKind.SERVICE, service_id)
    prefix = service.name if service is not None else service_id
    slot = raw.get("Slot")
    return f"{prefix}.{slot}" if slot else f"{prefix}.{raw.get('NodeID') or change.id}"


# Records never change, and readers poll the same newest pages: the summary and diff of the last
# ``MEMO_SIZE`` records served are kept (a service update's spec walk costs ~50-80 µs; a 200-entry page
# of them ~15 ms, then ~2 ms from the memo).
MEMO_SIZE = 2_048
_memo: OrderedDict[tuple[int, float], tuple[str, Data]] = OrderedDict()


def described(change: Change) -> tuple[str, Data]:
    """The summary and the ``changes``/``changesOmitted`` members (updates only) of one record, memoised."""
    key = (change.seq, change.timestamp)
    found = _memo.get(key)
    if found is not None:
        _memo.move_to_end(key)
        return found
    text, differences = change_summary(change)
    found = (text, diff.change_list(differences) if change.action is Action.UPDATE else {})
    _memo[key] = found
    if len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)
    return found


def described_for(change: Change, cache: Cache, visible: Visible | None) -> tuple[str, Data]:
    """``described`` as a restricted reader may see it: an update of a service or task whose states
    name configs, secrets, volumes or networks the reader may not read is described from redacted states
    (``app.acl.redact``; not memoised: only such records pay)."""
    if visible is None or change.action is not Action.UPDATE or change.before is None or change.after is None \
            or change.kind not in (ResourceKind.SERVICE, ResourceKind.TASK):
        return described(change)
    before = redact_raw(change.kind, change.before, cache, visible)[0]
    after = redact_raw(change.kind, change.after, cache, visible)[0]
    if before is change.before and after is change.after:
        return described(change)
    differences = diff.differences(change.kind, before, after)
    return summary.update_summary(change.kind, differences), diff.change_list(differences)


def change_summary(change: Change) -> tuple[str, list[diff.Difference]]:
    """The summary and (updates only) the differences of one record."""
    if change.action is Action.UPDATE:
        found = diff.differences(change.kind, change.before, change.after)
        return summary.update_summary(change.kind, found), found
    if change.action is Action.CREATE:
        return summary.create_summary(change.kind, change.after), []
    if change.action is Action.REMOVE:
        return summary.remove_summary(change.kind, change.before), []
    return summary.related_summary(change.kind), []


def entry(change: Change, cache: Cache, base: str, audit: Callable[[int], Data | None] | None = None,
          visible: Visible | None = None) -> Data:
    """The JSON form of one record (paths under the ``base`` path prefix); ``audit`` finds the stamp of a
    change made through this service's write endpoints (``app.writes.audit``); ``visible`` (a restricted
    reader's predicate) redacts embedded references it may not read."""
    text, members = described_for(change, cache, visible)
    body: Data = {
        "@id": base + entry_path(change.seq), "@type": ENTRY_TYPE, "id": change.seq,
        "timestamp": iso_time(change.timestamp), "type": change.kind.value, "action": change.action.value,
        "resourceId": change.id, "name": display_name(change, cache),
        "resource": base + resource_path(change), "summary": text,
    }
    body.update(members)   # shared with the memo: callers must not mutate an entry's changes
    body["audit"] = audit(change.seq) if audit is not None else None
    return body


def built_in_slices(changes: Iterable[Change], build: Callable[[Change], T]) -> list[T]:
    """``build`` of every record, in order, giving the loop a turn (``app.cooperate.pause``: a zero-delay
    timer, so sockets and timers are served; ``gevent.sleep(0)`` would resume before they are) whenever a
    slice of ``SLICE_SECONDS`` has been spent: a page's entries never hold the hub for the whole page. Records are
    immutable and an entry reads the cache only for display names, so a page built across yields is the
    page built at once, but for names changed meanwhile."""
    built: list[T] = []
    sliced(changes, lambda change: built.append(build(change)), SLICE_SECONDS)
    return built
