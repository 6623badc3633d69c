"""Related changes (``ref_changed``) keep a lane of their own in the ring (docs/history-and-feeds.md): a flood
of them never evicts a change of an object; readers still see one sequence; a replay that would miss one resyncs."""

from __future__ import annotations

from app.cache.history import RELATED_SHARE, Action, History
from app.resources import ResourceKind

K = ResourceKind


def _flood(history: History, own: int, related_per_own: int) -> None:
    for index in range(own):
        history.record(K.SERVICE, Action.UPDATE, "svc", "svc", None, None)
        for _ in range(related_per_own):
            history.record(K.SERVICE, Action.REF_CHANGED, f"svc{index}", "svc", None, None)


def test_a_flood_of_related_changes_never_evicts_changes_of_objects() -> None:
    history = History(capacity=100)
    _flood(history, 100, 50)                    # 5,000 related changes between 100 updates
    own = [c for c in history.newest_first() if c.action is not Action.REF_CHANGED]
    assert len(own) == 100 and own[-1].seq == 1, "every update kept"
    assert history.related_count == 100 // RELATED_SHARE
    assert len(history) == 125


def test_related_changes_are_bounded_in_bytes_too() -> None:
    history = History(capacity=1000, max_bytes=40_000)
    for _ in range(500):
        history.record(K.SERVICE, Action.REF_CHANGED, "s", "s", None, None)
    assert history.related_count * 240 <= 40_000 // RELATED_SHARE
    history.record(K.SERVICE, Action.UPDATE, "s", "s", None, None, 30_000)
    assert history.get(history.last_seq) is not None and history.bytes <= 40_000 + 40_000 // RELATED_SHARE


def test_the_lanes_merge_into_one_sequence_for_paging_lookup_and_replay() -> None:
    history = History(capacity=100)
    _flood(history, 10, 2)                      # 1 own, 2 related, 1 own, ...
    assert [c.seq for c in history.newest_first()] == list(range(30, 0, -1))
    assert [c.seq for c in history.newest_first(before=20)] == list(range(19, 0, -1))
    assert history.get(2) is not None and history.get(2).action is Action.REF_CHANGED   # type: ignore[union-attr]
    assert history.get(4) is not None and history.get(4).action is Action.UPDATE        # type: ignore[union-attr]
    assert [c.seq for c in history.since(25) or []] == [26, 27, 28, 29, 30]
    assert history.oldest_seq == 1 and not history.has_holes


def test_a_replay_from_before_a_lost_related_change_resyncs_and_from_after_it_completes() -> None:
    history = History(capacity=8)               # the related lane keeps 2
    _flood(history, 4, 2)                       # seqs: 1 U, 2-3 R, 4 U, 5-6 R, 7 U, 8-9 R, 10 U, 11-12 R
    assert [c.seq for c in history.newest_first()] == [12, 11, 10, 7, 4, 1]
    assert history.has_holes
    assert history.since(1) is None, "2..9 related changes left their lane: a replay would miss them"
    assert history.since(9) is not None and [c.seq for c in history.since(9) or []] == [10, 11, 12]
    assert [c.seq for c in history.since(10) or []] == [11, 12]
    assert history.since(12) == [] and history.since(13) is None


def test_restore_sorts_records_into_their_lanes() -> None:
    earlier = History(capacity=100)
    _flood(earlier, 5, 3)
    records = list(reversed(list(earlier.newest_first())))
    later = History(capacity=8)
    later.restore(records, earlier.last_seq)
    assert later.related_count == 2 and len(later) == 7
    assert [c.action for c in later.newest_first()][:2] == [Action.REF_CHANGED, Action.REF_CHANGED]
    assert later.record(K.SERVICE, Action.UPDATE, "s", "s", None, None).seq == earlier.last_seq + 1
