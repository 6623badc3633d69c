"""History pages that reach past the in-memory ring into the store's audit trail (``app.store.archive``).

The ring (``server.history_size``) is the replay window for SSE; the store file keeps records by age and
bytes (``storage.history_retention``, ``storage.history_max_bytes``). A page walks the ring while it is
complete (above ``History.complete_after`` and its oldest record), then goes on in the file below that
point, ``CHUNK`` rows at a time read on the store's thread (``Persister.older``: the hub only applies the
filters, ACL included, and yields between chunks). The walk is bounded as in ``app.history.selection``: at
most ``SCAN_BUDGET`` records examined per request, ring and file together; a page cut there ends with a
``next`` cursor that continues the walk. Ids are unique forever and may have gaps: the walk goes by
``seq < cursor``, so gaps cost nothing and pages never overlap or skip.

Without a store (persistence off or unavailable) this is ``selection.select`` over the ring.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from typing import Protocol

import gevent

from app.cache.history import Change, History
from app.history.selection import SCAN_BUDGET, Cursor, HistoryFilter, Selection, select

log = logging.getLogger(__name__)

CHUNK = 500


class Archive(Protocol):
    """Where records older than the ring are read (``app.store.persister.Persister``)."""

    def older(self, before: int, limit: int) -> list[Change]: ...

    def record(self, seq: int) -> Change | None: ...


def ring_floor(history: History) -> int:
    """The ring holds every record numbered above this; the archive serves the rest."""
    oldest = history.oldest_seq
    if oldest is None:
        return history.last_seq
    return max(history.complete_after, oldest - 1)


def select_all(history: History, archive: Archive | None, wanted: HistoryFilter, cursor: Cursor,
               budget: int = SCAN_BUDGET) -> Selection:
    """A page newest first below ``cursor.before``: from the ring, then from the archive."""
    if archive is None:
        return select(history, wanted, cursor, budget)
    found: list[Change] = []
    last_seen: Change | None = None
    try:
        for scanned, change in enumerate(_newest_first(history, archive, cursor.before)):
            if scanned >= budget:
                return Selection(found, last_seen.seq if last_seen is not None else cursor.before)
            last_seen = change
            if wanted.matches(change):
                if len(found) == cursor.limit:
                    return Selection(found, found[-1].seq)
                found.append(change)
    except sqlite3.Error as exc:
        log.warning("history archive unreadable; the page ends at the ring", extra={"error": str(exc)})
    return Selection(found, None)


def _newest_first(history: History, archive: Archive, before: int | None) -> Iterator[Change]:
    floor = ring_floor(history)
    for change in history.newest_first(before):
        if change.seq <= floor:
            break
        yield change
    position = floor + 1 if before is None else min(before, floor + 1)
    while True:
        rows = archive.older(position, CHUNK)
        yield from rows
        if len(rows) < CHUNK:
            return
        position = rows[-1].seq
        gevent.sleep(0)   # the filters ran on the hub: let others in between chunks


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
