"""Pages across the ring/archive boundary (``app.history.archive``): no duplicate or missing ids, filters and
the ACL predicate applied in the archive too, the scan bound, ``/history/{id}`` lookup, an unreadable file."""

from __future__ import annotations

import sqlite3

import pytest

from app.cache.history import Action, Change, History
from app.history import archive
from app.history.archive import find, ring_floor, select_all
from app.history.selection import Cursor, HistoryFilter
from app.resources import ResourceKind as K
from app.store.archive import ANY, Flat, Window


class ListArchive:
    """Every record ever made (what the store file holds), read like ``Persister.older``."""

    def __init__(self) -> None:
        self.records: list[Change] = []
        self.calls = 0
        self.broken = False

    def older(self, before: int, limit: int, flat: Flat = ANY, window: int = 5_000) -> Window:
        self.calls += 1
        if self.broken:
            raise sqlite3.OperationalError("disk I/O error")
        below = [change for change in reversed(self.records) if change.seq < before]
        examined = below[:window]
        low = examined[-1].seq if len(below) >= window else 0
        return Window([change for change in examined if flat.matches(change)][:limit], low, len(below) <= window)

    def record(self, seq: int) -> Change | None:
        if self.broken:
            raise sqlite3.OperationalError("disk I/O error")
        return next((change for change in self.records if change.seq == seq), None)


def _filled(count: int, capacity: int = 100) -> tuple[History, ListArchive]:
    history, store = History(capacity), ListArchive()
    for number in range(count):
        kind = K.SERVICE if number % 3 else K.CONFIG
        action = Action.REF_CHANGED if number % 7 == 0 else Action.UPDATE
        store.records.append(history.record(kind, action, f"id{number % 5}", f"n{number}", None, None))
    return history, store


def _pages(history: History, store: ListArchive, wanted: HistoryFilter, limit: int) -> list[list[int]]:
    pages, before = [], None
    for _ in range(1_000):
        chosen = select_all(history, store, wanted, Cursor(before, limit))
        pages.append([change.seq for change in chosen.changes])
        if chosen.next_before is None:
            return pages
        before = chosen.next_before
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("limit", [1, 7, 50, 200])
def test_pages_cross_the_ring_into_the_archive_without_duplicates_or_holes(limit: int) -> None:
    history, store = _filled(1_000)
    assert len(history) < 200 and ring_floor(history) > 700
    seen = [seq for page in _pages(history, store, HistoryFilter(), limit) for seq in page]
    assert seen == [change.seq for change in reversed(store.records)]


def test_filters_and_the_acl_apply_in_the_archive_too() -> None:
    history, store = _filled(1_000)
    hidden = {"id2"}
    wanted = HistoryFilter(kind=K.SERVICE, action=frozenset({Action.UPDATE}),
                           readable=lambda change: change.id not in hidden)
    seen = [seq for page in _pages(history, store, wanted, 25) for seq in page]
    expected = [change.seq for change in reversed(store.records)
                if change.kind is K.SERVICE and change.action is Action.UPDATE and change.id not in hidden]
    assert seen == expected and len(expected) > 300


def test_a_related_lane_that_lost_records_does_not_hide_them() -> None:
    history, store = _filled(1_000)
    assert history.complete_after > (history.oldest_seq or 0)   # related records left above the oldest kept
    related = HistoryFilter(action=frozenset({Action.REF_CHANGED}))
    seen = [seq for page in _pages(history, store, related, 50) for seq in page]
    assert seen == [change.seq for change in reversed(store.records) if change.action is Action.REF_CHANGED]


def test_the_scan_is_bounded_and_the_cursor_continues_the_walk() -> None:
    history, store = _filled(3_000)
    nothing = HistoryFilter(object_id="nobody")
    chosen = select_all(history, store, nothing, Cursor(None, 50), budget=1_000)
    assert chosen.changes == [] and chosen.next_before is not None and store.calls <= archive.MAX_READS
    pages = _pages(history, store, nothing, 50)
    assert all(page == [] for page in pages) and len(pages) >= 1


def test_find_reads_old_ids_from_the_archive_and_never_invents_one() -> None:
    history, store = _filled(1_000)
    assert find(history, store, 5) is store.records[4]
    newest = history.last_seq
    assert find(history, store, newest) is history.get(newest)
    assert find(history, store, newest + 1) is None and find(history, None, 5) is None


def test_an_unreadable_archive_ends_the_page_at_the_ring() -> None:
    history, store = _filled(1_000)
    store.broken = True
    chosen = select_all(history, store, HistoryFilter(), Cursor(None, 200))
    assert 0 < len(chosen.changes) <= len(history) and chosen.next_before is None
    assert find(history, store, 5) is None


def test_without_a_store_the_ring_alone_is_paged() -> None:
    history, _store = _filled(1_000)
    chosen = select_all(history, None, HistoryFilter(), Cursor(history.oldest_seq, 50))
    assert chosen.changes == [] and chosen.next_before is None
