"""Reading the audit trail in the store file: history pages older than the in-memory ring.

A second, read-only connection to the same file (WAL: readers never block the writer nor see a half-written
transaction), used only on the store's thread (``Persister.older``/``Persister.record``), so the hub never
waits on SQLite. Each call reads at most ``limit`` rows by primary key (``seq``), newest first: its cost is
the page, never the file's size.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.cache.history import Change
from app.store.database import COLUMNS, change_from_row


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

    def older(self, before: int, limit: int) -> list[Change]:
        """Up to ``limit`` records numbered below ``before``, newest first."""
        rows = self._connection().execute(
            f"SELECT {COLUMNS} FROM history WHERE seq < ? ORDER BY seq DESC LIMIT ?", (before, limit)).fetchall()
        return [change_from_row(row) for row in rows]

    def get(self, seq: int) -> Change | None:
        row = self._connection().execute(f"SELECT {COLUMNS} FROM history WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else change_from_row(row)

    def close(self) -> None:
        database, self._db = self._db, None
        if database is not None:
            database.close()
