"""The JSON log page (``LogResponse`` plus ``cursor``, docs/logs.md) and the agent tool's ``{lines, cursor}``.

Lines from several tasks (and, for a stack, several services) arrive interleaved in the order the nodes
send them; a page is sorted by timestamp (a stable sort: equal stamps keep their arrival order), filtered
by the query, and keeps the newest ``limit``, oldest first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.cooperate import pause
from app.logs.lines import LogLine
from app.logs.params import LogQuery
from app.logs.timestamps import cursor_after, format_rfc3339


@dataclass(frozen=True, slots=True)
class Selection:
    lines: list[LogLine]      # kept lines, oldest first
    has_more: bool            # older matching lines were cut, or the engine may hold more than it sent
    cursor: str | None


def select(lines: Sequence[LogLine], query: LogQuery, *, engine_lines: int | None = None) -> Selection:
    """Filter, order and cut; ``engine_lines`` (how many the engine sent) tells whether it hit the tail."""
    matching = sorted((line for line in lines if query.keeps(line)), key=lambda line: line.ns)
    kept = matching[-query.limit:] if len(matching) > query.limit else matching
    received = len(lines) if engine_lines is None else engine_lines
    has_more = len(matching) > len(kept) or received >= query.engine_tail
    return Selection(kept, has_more, cursor_of(kept, query))


class Collector:
    """Gathers the matching lines of a one-shot read; past :data:`TRIM_AT` it keeps only the newest
    ``limit`` (one sort), so a stack of many busy tasks cannot grow the worker's memory without bound."""

    TRIM_AT = 4 * 10_000

    def __init__(self, query: LogQuery) -> None:
        self.query = query
        self.lines: list[LogLine] = []
        self.received = 0
        self.trimmed = False

    def add(self, batch: Sequence[LogLine]) -> None:
        self.received += len(batch)
        keeps = self.query.keeps
        self.lines.extend(line for line in batch if keeps(line))
        if len(self.lines) > self.TRIM_AT:
            self.lines.sort(key=lambda line: line.ns)
            del self.lines[:-self.query.limit]
            self.trimmed = True

    def selection(self) -> Selection:
        chosen = select(self.lines, self.query, engine_lines=self.received)
        return Selection(chosen.lines, chosen.has_more or self.trimmed, chosen.cursor)


def cursor_of(lines: Sequence[LogLine], query: LogQuery) -> str | None:
    """Last line + 1 ns; with no line, the start the request gave (``since`` as given, ``after`` + 1 ns:
    the first instant not yet covered), else None."""
    if lines:
        return cursor_after(max(line.ns for line in lines))
    return format_rfc3339(query.start) if query.given_start and query.start is not None else None


def log_page(selection: Selection, envelope: dict[str, Any]) -> dict[str, Any]:
    lines = selection.lines
    envelope.update(
        lines=[line.to_json() for line in lines],
        oldest=lines[0].timestamp if lines else None,
        newest=lines[-1].timestamp if lines else None,
        hasMore=selection.has_more,
        cursor=selection.cursor,
    )
    return envelope


ENCODE_CHUNK = 500   # lines encoded between two yields to the hub


def log_page_bytes(selection: Selection, envelope: dict[str, Any]) -> bytes:
    """:func:`log_page` encoded as JSON, ``ENCODE_CHUNK`` lines at a time with a yield to the hub between
    chunks: a 10,000-line page is ~3 MB of JSON, which one ``json.dumps`` would build in one stretch."""
    body = log_page(Selection([], selection.has_more, selection.cursor), envelope)
    body["oldest"] = selection.lines[0].timestamp if selection.lines else None
    body["newest"] = selection.lines[-1].timestamp if selection.lines else None
    chunks: list[bytes] = []
    lines = selection.lines
    for start in range(0, len(lines), ENCODE_CHUNK):
        chunks.append(b",".join(_encode(line.to_json()) for line in lines[start:start + ENCODE_CHUNK]))
        pause()
    head = _encode(body)   # "lines":[] stands once: a string member holding it would be escaped
    return head.replace(b'"lines":[]', b'"lines":[' + b",".join(chunks) + b"]", 1)


def _encode(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def tool_result(selection: Selection) -> dict[str, Any]:
    """The agent tool's answer (interface "Agent tools" rule 3)."""
    return {"lines": [line.to_json() for line in selection.lines], "cursor": selection.cursor}


def text_body(selection: Selection) -> bytes:
    return "".join(line.to_text() + "\n" for line in selection.lines).encode()
