"""The two read tools: ``get_logs`` (a service's recent lines and a cursor) and ``search``.

Both use the REST code paths directly (the log reading, page and cursor of ``app.logs``; the search of
``app.query.search`` with the same ACL narrowing as ``GET /search``) in the ``POST /mcp`` request itself:
they are reads, with the agent's identity already in ``g``.

``get_logs`` (docs/agent-tools.md): ``tail`` ≤0 → 100, at most 1000; ``since`` (RFC 3339, nanoseconds) keeps
lines at or after it; ``level`` keeps lines at that severity or above, read from the line (a JSON message's
``level``/``severity``/``lvl`` member, ``level=warn``, or a level word such as ``ERROR`` or ``[warn]``; a
line with none counts as info). With ``since`` or ``level`` the engine is asked for ``tail x 10`` lines
before filtering. The cursor is the last line's timestamp + 1 ns; given back as ``since`` it returns only
newer lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from app.errors import ProblemError
from app.http import respond
from app.http.acl_read import read_filter, require_entry, require_grants
from app.http.admission import released
from app.http.search import require_synced
from app.logs.facility import log_facility
from app.logs.labels import Labeller
from app.logs.lines import LogLine, decode_json_message
from app.logs.page import cursor_of
from app.logs.params import MAX_LIMIT, LogQuery
from app.logs.reading import read_once
from app.logs.targets import service_targets
from app.logs.timestamps import TimeFormatError, parse_rfc3339
from app.query.search import parse_search_query, result_members
from app.runtime import current_runtime

DEFAULT_TAIL = 100
MAX_TAIL = 1000
WIDEN = 10
LEVELS = ("debug", "info", "warn", "error")
_RANK = {"trace": 0, "debug": 0, "info": 1, "notice": 1, "warn": 2, "warning": 2, "error": 3, "err": 3,
         "fatal": 3, "critical": 3, "crit": 3, "panic": 3, "alert": 3, "emerg": 3}
_WORD = re.compile(r"(?i)(?:\blevel[=:]\s*\"?|\[|\b)(trace|debug|info|notice|warn|warning|error|err|fatal|"
                   r"critical|crit|panic)\b")
_SCAN = 200   # characters of a message looked at for a level word


@dataclass(frozen=True, slots=True)
class _WideQuery(LogQuery):
    """A log query whose engine read is set apart from the lines kept (``tail x 10`` read, all kept)."""

    read: int = DEFAULT_TAIL

    @property
    def engine_tail(self) -> int:
        return self.read


def line_level(line: LogLine) -> int:
    """The line's severity rank (0 debug … 3 error), info (1) when it marks none."""
    decoded = decode_json_message(line.message)
    if decoded is not None:
        for key in ("level", "severity", "lvl", "log.level"):
            value = decoded.get(key)
            if isinstance(value, str) and value.lower() in _RANK:
                return _RANK[value.lower()]
    match = _WORD.search(line.message[:_SCAN])
    return _RANK[match.group(1).lower()] if match else 1


def tail_of(value: Any) -> int:
    tail = int(value) if isinstance(value, int) else DEFAULT_TAIL
    return DEFAULT_TAIL if tail <= 0 else min(tail, MAX_TAIL)


def get_logs(service: str, tail: int, since: str | None, level: str | None) -> dict[str, Any]:
    """``{lines, cursor}`` of one service (id or name, resolved before): 404 and ACL001 as REST."""
    start = None
    if since is not None:
        try:
            start = parse_rfc3339(since)
        except TimeFormatError:
            raise ProblemError("LOG003", detail=f"since={since[:40]!r} is not an RFC 3339 timestamp.") from None
    widened = since is not None or level is not None
    read = min(tail * WIDEN, MAX_LIMIT) if widened else tail
    query = _WideQuery(limit=read, start=start, given_start=start is not None, read=read)
    cache = current_runtime().cache
    targets = service_targets(cache, service, require_entry)
    with released():   # waits on the engine: others may compute meanwhile
        selection = read_once(log_facility().engine, targets, query)
    lines = selection.lines
    if level is not None:
        floor = LEVELS.index(level)
        lines = [line for line in lines if line_level(line) >= floor]
    kept = lines[-tail:]
    Labeller(cache).label_all(kept)
    return {"lines": [line.to_json() for line in kept], "cursor": cursor_of(kept, query)}


def search(query: str, limit: int | None) -> dict[str, Any]:
    """The ``GET /search`` result for ``query`` (ACL-narrowed the same way), without the JSON-LD envelope."""
    args = {"q": query} if limit is None else {"q": query, "limit": str(limit)}
    parsed = parse_search_query(args)
    require_synced()
    require_grants()
    runtime, keep = current_runtime(), read_filter()
    results = runtime.search.search(parsed, keep)
    return result_members(runtime.cache, parsed, results, respond.base_path(), keep)
