"""Reading the audit trail in the store file: history pages older than the in-memory ring.

A second, read-only connection to the same file (WAL: readers never block the writer nor see a half-written
transaction), used only on the store's thread (``Persister.older``/``Persister.record``), so the hub never
waits on SQLite. A read examines a *window* of at most ``window`` rows below the cursor (found by the primary
key, ``seq``), applies the flat filters (kind, object id, actions) in SQL, and returns at most ``limit``
matching rows, newest first: its cost is bounded by the window, never by the file's size, and rows the flat
filters reject are never decoded.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cache.history import Change
from app.store.database import COLUMNS, change_from_row


@dataclass(frozen=True, slots=True)
class Flat:
    """The filters SQL applies (values as stored); None: any."""
    kind: str | None = None
    object_id: str | None = None
    actions: tuple[str, ...] | None = None

    def sql(self) -> tuple[str, list[Any]]:
        clauses, values = [], []
        if self.kind is not None:
            clauses.append("kind = ?")
            values.append(self.kind)
        if self.object_id is not None:
            clauses.append("object_id = ?")
            values.append(self.object_id)
        if self.actions is not None:
            clauses.append(f"action IN ({', '.join('?' for _ in self.actions)})")
            values.extend(self.actions)
        return "".join(" AND " + clause for clause in clauses), values

    def matches(self, change: Change) -> bool:
        return ((self.kind is None or change.kind.value == self.kind)
                and (self.object_id is None or change.id == self.object_id)
                and (self.actions is None or change.action.value in self.actions))


ANY = Flat()


@dataclass(frozen=True, slots=True)
class Window:
    """What one read found: ``changes`` newest first (at most the limit), the lowest number the window
    examined (``low``), and whether the window reached the file's oldest record (``at_start``)."""
    changes: list[Change]
    low: int
    at_start: bool


class ArchiveReader:
    """Opened on first use, reopened after ``reset`` (the file was replaced); one thread at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._stale = False

    def reset(self) -> None:
        """The file was moved aside and re-created: the next read opens the new one."""
        self._stale = True

    def _connection(self) -> sqlite3.Connection:
        if self._stale and self._db is not None:
            self._db.close()
            self._db = None
        self._stale = False
        if self._db is None:
            uri = Path(self.path).absolute().as_uri() + "?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None, check_same_thread=False)
        return self._db

    def older(self, before: int, limit: int, flat: Flat = ANY, window: int = 5_000) -> Window:
        """Up to ``limit`` records numbered below ``before`` that ``flat`` selects, newest first, among the
        ``window`` records below ``before``."""
        db = self._connection()
        if flat == ANY:   # every row matches: the rows read are the window (no walk to find its edge)
            count = min(limit, window)
            rows = db.execute(f"SELECT {COLUMNS} FROM history WHERE seq < ? ORDER BY seq DESC LIMIT ?",
                              (before, count)).fetchall()
            full = len(rows) == count
            return Window([change_from_row(row) for row in rows], int(rows[-1][0]) if full else 0, not full)
        where, values = flat.sql()
        spans = sorted({min(window, max(4 * limit, 64)), window})   # a small window first: when the filters
        for span in spans:                                             # match often, it fills the page alone
            edge = db.execute("SELECT seq FROM history WHERE seq < ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
                              (before, max(0, span - 1))).fetchone()
            low = 0 if edge is None else int(edge[0])
            rows = db.execute(f"SELECT {COLUMNS} FROM history WHERE seq < ? AND seq >= ?{where} "
                              "ORDER BY seq DESC LIMIT ?", (before, low, *values, limit)).fetchall()
            if len(rows) == limit or edge is None or span == window:
                break
        return Window([change_from_row(row) for row in rows], low, edge is None)

    def get(self, seq: int) -> Change | None:
        row = self._connection().execute(f"SELECT {COLUMNS} FROM history WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else change_from_row(row)

    def close(self) -> None:
        database, self._db = self._db, None
        if database is not None:
            database.close()
