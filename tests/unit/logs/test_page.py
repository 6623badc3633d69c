"""The JSON page selection, cursor and tool result (app.logs.page)."""

from __future__ import annotations

from app.logs.lines import LogLine
from app.logs.page import Collector, cursor_of, log_page, select, text_body, tool_result
from app.logs.params import parse_log_query
from app.logs.timestamps import NS_PER_SECOND, format_rfc3339

BASE = 1_775_000_000 * NS_PER_SECOND


def lines(*offsets: int, stream: str = "stdout") -> list[LogLine]:
    return [LogLine(BASE + offset, stream, f"m{offset}") for offset in offsets]


def q(**args: str):  # type: ignore[no-untyped-def]
    return parse_log_query(args, BASE + 10 * NS_PER_SECOND, live=False)


def test_sorted_oldest_first_and_the_newest_limit_kept() -> None:
    chosen = select(lines(5, 1, 4, 2, 3), q(limit="3"))
    assert [line.message for line in chosen.lines] == ["m3", "m4", "m5"]
    assert chosen.has_more
    assert chosen.cursor == format_rfc3339(BASE + 6)


def test_the_cursor_as_since_returns_only_newer_lines_none_repeated() -> None:
    first = select(lines(1, 2, 3), q(limit="10"))
    later = lines(1, 2, 3, 4, 5)
    second = select(later, q(since=first.cursor or ""))
    assert [line.message for line in second.lines] == ["m4", "m5"]
    third = select(later, q(since=second.cursor or ""))
    assert third.lines == []
    assert third.cursor == second.cursor          # nothing new: the given since is echoed


def test_the_cursor_without_lines() -> None:
    assert cursor_of([], q(after=format_rfc3339(BASE))) == format_rfc3339(BASE + 1)
    assert cursor_of([], q()) is None


def test_has_more_when_the_engine_sent_all_it_was_asked_for() -> None:
    assert select(lines(1, 2), q(limit="2")).has_more
    assert not select(lines(1, 2), q(limit="3")).has_more


def test_the_collector_filters_and_trims() -> None:
    collector = Collector(q(limit="2", stream="stderr"))
    collector.add(lines(1, 2, 3) + lines(4, 5, stream="stderr"))
    chosen = collector.selection()
    assert [line.message for line in chosen.lines] == ["m4", "m5"]
    assert collector.received == 5


def test_page_members_tool_result_and_text() -> None:
    chosen = select(lines(1, 2), q(limit="5"))
    page = log_page(chosen, {"@type": "LogResponse"})
    assert page["oldest"] == format_rfc3339(BASE + 1) and page["newest"] == format_rfc3339(BASE + 2)
    assert page["hasMore"] is False and page["cursor"] == format_rfc3339(BASE + 3)
    assert tool_result(chosen) == {"lines": page["lines"], "cursor": page["cursor"]}
    assert text_body(chosen).decode().splitlines()[0].endswith(" - stdout m1")
    empty = log_page(select([], q()), {})
    assert (empty["oldest"], empty["newest"], empty["lines"]) == (None, None, [])


def test_the_encoded_page_is_the_page_as_json_for_any_size() -> None:
    """The chunked encoder (yields between parts) gives the same bytes as one json.dumps of log_page, also
    when a message holds the text of the splice marker."""
    import json

    from app.logs.page import ENCODE_CHUNK, Selection, log_page, log_page_bytes
    for count in (0, 1, ENCODE_CHUNK, 2 * ENCODE_CHUNK + 3):
        page = [LogLine(BASE + i, "stdout", '"lines":[] {"a": 1}' if i % 7 == 0 else f"m{i}") for i in range(count)]
        selection = Selection(page, False, "c")
        expected = json.dumps(log_page(selection, {"@id": "/x"}), ensure_ascii=False, separators=(",", ":")).encode()
        assert log_page_bytes(selection, {"@id": "/x"}) == expected
        assert json.loads(expected)["lines"] == [line.to_json() for line in page]
