"""History pages that reach past the in-memory ring into the store's audit trail (``app.store.archive``).

The ring (``server.history_size``) is the replay window for SSE; the store file keeps records by age and
bytes (``storage.history_retention``, ``storage.history_max_bytes``). A page walks the ring while it is
complete (above ``History.complete_after`` and its oldest record), then goes on in the file below that
point, read on the store's thread (``Persister.older``): the kind, id and action filters run in SQL, the
stack scope and the ACL (``readable``) here on the hub, between reads the hub yields. The first read asks
for what the page still needs (``limit + 1``), later ones for twice as many, at most ``CHUNK``. The walk is
bounded as in ``app.history.selection``: at most ``SCAN_BUDGET`` records examined per request, ring and file
together (a window of the file counts whole), and ``MAX_READS`` reads; a page cut there ends with a ``next``
cursor that continues the walk (possibly short or empty). Ids are unique forever and may have gaps: the walk goes by
``seq < cursor``, so gaps cost nothing and pages never overlap or skip.

Without a store (persistence off or unavailable) this is ``selection.select`` over the ring.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Protocol

from app.cache.history import Change, History
from app.cooperate import pause
from app.history.selection import SCAN_BUDGET, Cursor, HistoryFilter, Selection, select
from app.store.archive import Flat, Window

log = logging.getLogger(__name__)

CHUNK = 500        # records decoded per read at most (the first read asks for what the page still needs)
MAX_READS = 10     # reads per request: with SCAN_BUDGET, what bounds one request's work in the file


class Archive(Protocol):
    """Where records older than the ring are read (``app.store.persister.Persister``)."""

    def older(self, before: int, limit: int, flat: Flat = ..., window: int = ...) -> Window: ...

    def record(self, seq: int) -> Change | None: ...


def ring_floor(history: History) -> int:
    """The ring holds every record numbered above this; the archive serves the rest."""
    oldest = history.oldest_seq
    if oldest is None:
        return history.last_seq
    return max(history.complete_after, oldest - 1)


def flat_filters(wanted: HistoryFilter) -> Flat:
    """The filters the file applies in SQL; ``scope`` and ``readable`` (the ACL) are judged on the hub."""
    actions = None if wanted.action is None else tuple(sorted(action.value for action in wanted.action))
    return Flat(None if wanted.kind is None else wanted.kind.value, wanted.object_id, actions)


def select_all(history: History, archive: Archive | None, wanted: HistoryFilter, cursor: Cursor,
               budget: int = SCAN_BUDGET) -> Selection:
    """A page newest first below ``cursor.before``: from the ring, then from the archive."""
    if archive is None:
        return select(history, wanted, cursor, budget)
    found: list[Change] = []
    floor = ring_floor(history)
    position = cursor.before if cursor.before is not None else floor + 1
    scanned = 0
    for change in history.newest_first(cursor.before):
        if change.seq <= floor:
            break
        if scanned >= budget:   # cut as ``select`` does: the next page goes on below the last one examined
            return Selection(found, position)
        scanned += 1
        position = change.seq
        if wanted.matches(change):
            if len(found) == cursor.limit:
                return Selection(found, found[-1].seq)
            found.append(change)
    position = min(position, floor + 1)
    try:
        return _from_archive(archive, wanted, cursor.limit, found, position, max(budget - scanned, CHUNK))
    except sqlite3.Error as exc:
        log.warning("history archive unreadable; the page ends at the ring", extra={"error": str(exc)})
        return Selection(found, None)


def _from_archive(archive: Archive, wanted: HistoryFilter, limit: int, found: list[Change], position: int,
                  budget: int) -> Selection:
    """Go on below ``position`` in the file: windows of at most ``budget`` records, the flat filters in
    SQL, the rest here; cut (with a cursor that continues) when the budget or ``MAX_READS`` runs out."""
    flat = flat_filters(wanted)
    size = min(CHUNK, limit + 1 - len(found))
    for reads in range(1, MAX_READS + 1):
        window = archive.older(position, size, flat, budget)
        for change in window.changes:
            position = change.seq
            if wanted.matches(change):
                if len(found) == limit:
                    return Selection(found, found[-1].seq)
                found.append(change)
        if len(window.changes) < size:          # the window is done
            if window.at_start:
                return Selection(found, None)
            return Selection(found, window.low)    # the budget's window ends here: the next page goes on below
        budget -= len(window.changes)
        if budget <= 0 or reads == MAX_READS:
            return Selection(found, position)
        size = min(CHUNK, size * 2)
        pause()   # the filters ran on the hub: let others (sockets, timers too) in between reads
    return Selection(found, position)   # pragma: no cover (the loop returns)


def find(history: History, archive: Archive | None, seq: int) -> Change | None:
    """Record ``seq`` from the ring, else from the archive (None: never recorded or no longer kept)."""
    change = history.get(seq)
    if change is not None or archive is None or seq > ring_floor(history):
        return change
    try:
        return archive.record(seq)
    except sqlite3.Error as exc:
        log.warning("history archive unreadable", extra={"error": str(exc)})
        return None
