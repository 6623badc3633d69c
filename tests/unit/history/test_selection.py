"""Which records a page shows: the before cursor, limit, filters, the scan budget, stack members."""

from __future__ import annotations

import pytest

from app.cache.history import Action, History
from app.cache.store import Cache
from app.errors import ProblemError
from app.history.selection import (
    DEFAULT_ACTIONS,
    Cursor,
    HistoryFilter,
    parse_cursor,
    parse_filter,
    select,
    stack_scope,
)
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def _ring(count: int, capacity: int = 10_000) -> History:
    history = History(capacity)
    for index in range(count):
        kind = K.SERVICE if index % 3 else K.NODE
        history.record(kind, Action.UPDATE if index % 2 else Action.CREATE, f"id{index % 5}", "n", None, None)
    return history


def _walk(history: History, wanted: HistoryFilter, limit: int, budget: int = 5_000) -> tuple[list[int], int]:
    seen: list[int] = []
    before, pages = None, 0
    while True:
        pages += 1
        assert pages < 1_000
        page = select(history, wanted, Cursor(before, limit), budget)
        seen += [change.seq for change in page.changes]
        if page.next_before is None:
            return seen, pages
        before = page.next_before


def test_newest_first_from_a_cursor_and_get_by_sequence() -> None:
    history = _ring(20, capacity=10)            # keeps 11..20
    assert [c.seq for c in history.newest_first(15)] == [14, 13, 12, 11]
    assert [c.seq for c in history.newest_first(100)][:2] == [20, 19]
    assert list(history.newest_first(11)) == []
    assert history.get(12) is not None and history.get(12).seq == 12   # type: ignore[union-attr]
    assert history.get(10) is None and history.get(21) is None


@pytest.mark.parametrize("limit", [1, 3, 7, 50])
def test_paging_walks_every_record_once_newest_first(limit: int) -> None:
    history = _ring(40)
    seen, _ = _walk(history, HistoryFilter(), limit)
    assert seen == list(range(40, 0, -1))


@pytest.mark.parametrize("limit", [1, 4])
def test_filtered_paging_walks_exactly_the_matching_records(limit: int) -> None:
    history = _ring(60)
    wanted = HistoryFilter(kind=K.SERVICE, object_id="id2", action=frozenset({Action.UPDATE}))
    expected = [c.seq for c in history.newest_first() if wanted.matches(c)]
    assert expected
    assert _walk(history, wanted, limit)[0] == expected


def test_a_page_has_a_next_cursor_only_when_an_older_match_exists() -> None:
    history = _ring(10)
    page = select(history, HistoryFilter(), Cursor(None, 10))
    assert len(page.changes) == 10 and page.next_before is None
    page = select(history, HistoryFilter(), Cursor(None, 9))
    assert page.next_before == 2


def test_the_scan_budget_cuts_a_page_and_the_cursor_resumes_the_walk() -> None:
    history = _ring(100)
    wanted = HistoryFilter(object_id="id0")
    expected = [c.seq for c in history.newest_first() if wanted.matches(c)]
    first = select(history, wanted, Cursor(None, 50), budget=10)
    assert len(first.changes) <= 10 and first.next_before == 91   # stopped after examining 100..91
    seen, pages = _walk(history, wanted, 50, budget=10)
    assert seen == expected and pages >= 10


def test_parse_filter_and_cursor_reject_bad_values_with_api012() -> None:
    assert parse_filter({"type": "service", "action": "ref_changed", "resourceId": "x"}, targets=True) == \
        HistoryFilter(K.SERVICE, "x", frozenset({Action.REF_CHANGED}))
    assert parse_filter({"type": "service"}, targets=False) == HistoryFilter(action=DEFAULT_ACTIONS)   # URL's
    for args in ({"type": "services"}, {"action": "delete"}, {"resourceId": " "}, {"action": ""},
                 {"action": "update,"}, {"action": ",".join(["update"] * 9)}):
        with pytest.raises(ProblemError) as raised:
            parse_filter(args, targets=True)
        assert raised.value.code == "API012"
    for before in ("abc", "-1", "0", "1.5", "+3", ""):
        with pytest.raises(ProblemError) as raised:
            parse_cursor({"before": before})
        assert raised.value.code == "API012"
    assert parse_cursor({"before": "9" * 40}) == Cursor(None, 50)
    assert parse_cursor({"before": "7", "limit": "500"}) == Cursor(7, 200)
    assert parse_cursor({"limit": "0"}) == Cursor(None, 50)
    assert parse_cursor({"limit": "x"}) == Cursor(None, 50)


def test_a_stack_scope_takes_the_stack_its_members_and_their_tasks() -> None:
    cache = Cache()
    cache.replace_all(o.cluster())
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "shop_web_api", stack="shop", replicas=5, version=99))
    member_of_shop = stack_scope(cache, "shop")
    chosen = {(c.kind, c.id) for c in cache.history.newest_first() if member_of_shop(c)}
    assert (K.STACK, "shop") in chosen and (K.SERVICE, o.SVC_WEB) in chosen and (K.SERVICE, o.SVC_DB) in chosen
    assert (K.CONFIG, o.CFG_SHOP) in chosen and (K.VOLUME, o.VOL_SHOP) in chosen
    assert (K.TASK, o.TASK_WEB_1) in chosen
    assert (K.SERVICE, o.SVC_MONITOR) not in chosen and (K.CONFIG, o.CFG_OTHER) not in chosen
    assert (K.TASK, o.TASK_MON_MANAGER) not in chosen


def test_without_action_a_page_shows_changes_of_objects_and_a_list_brings_related_ones_back() -> None:
    assert parse_filter({}, targets=True).action == DEFAULT_ACTIONS == \
        frozenset({Action.CREATE, Action.UPDATE, Action.REMOVE})
    assert parse_filter({"action": "update,ref_changed"}, targets=False).action == \
        frozenset({Action.UPDATE, Action.REF_CHANGED})
    history = History(100)
    for index in range(30):
        history.record(K.SERVICE, Action.REF_CHANGED if index % 3 else Action.UPDATE, "s", "s", None, None)
    default = select(history, parse_filter({}, targets=True), Cursor(None, 50)).changes
    assert [c.seq for c in default] == list(range(28, 0, -3))
    related = select(history, parse_filter({"action": "ref_changed"}, targets=True), Cursor(None, 50)).changes
    assert len(related) == 20 and all(c.action is Action.REF_CHANGED for c in related)
    both = select(history, parse_filter({"action": "update,ref_changed"}, targets=True), Cursor(None, 50)).changes
    assert [c.seq for c in both] == list(range(30, 0, -1))
