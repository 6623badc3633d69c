"""Idempotency-Key records: what the first request with a key asked (its fingerprint) and how it ended.

Two backends with one interface (:class:`KeyStore`):

- :class:`SqliteKeys` — the table ``idempotency_keys`` in the state store's file (``<data_dir>/shoal.db``),
  through a connection of its own (the persister owns its own and its schema; this table is created with
  ``CREATE TABLE IF NOT EXISTS`` once the persister has made the file). Every call runs on a one-thread
  gevent ``ThreadPool``, so the hub only waits; each change is committed before the call returns, answers
  with ``synchronous=FULL``, so an answer that went out survives a ``kill -9`` of the worker (and a power
  cut); the "started" mark with ``NORMAL`` (in the WAL, no fsync: it survives a killed process).
- :class:`MemoryKeys` — a bounded ordered map, when persistence is off (``:memory:`` data dir or
  ``storage.snapshot=false``): keys then do not survive a restart.

Both are bounded by age (``writes.idempotency_ttl``), count (``writes.idempotency_max_keys``) and stored
bytes (:data:`MAX_BYTES`); the oldest records go first.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

from app.store.side_table import SideTable

log = logging.getLogger(__name__)

MAX_BYTES = 64 * 1024 * 1024   # stored answer bytes kept at most (bodies + headers)
State = Literal["started", "done", "unknown"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key's record. ``started``: the engine call began (a process that died then left it: the
    outcome is unknown); ``unknown``: the call timed out (504); ``done``: the answer, replayed as is.
    ``pin`` is the object and version index the write was computed against (a retry reuses it, so the
    engine cannot apply both)."""

    scope: str
    key: str
    fingerprint: str
    state: State
    created: float
    request_id: str
    status: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    pin: dict[str, Any] | None = None

    @property
    def size(self) -> int:
        return len(self.body) + sum(len(n) + len(v) for n, v in self.headers) + len(self.key) + 200


class KeyStore(Protocol):
    def get(self, scope: str, key: str) -> KeyRecord | None: ...
    def put(self, record: KeyRecord, *, sync: bool = True) -> None: ...
    def delete(self, scope: str, key: str) -> None: ...
    def close(self) -> None: ...


class MemoryKeys:
    """The in-process store (persistence off): an insertion-ordered map, oldest evicted first."""

    def __init__(self, ttl: float, max_keys: int, max_bytes: int = MAX_BYTES,
                 clock: Callable[[], float] = time.time) -> None:
        self._records: OrderedDict[tuple[str, str], KeyRecord] = OrderedDict()
        self._bytes = 0
        self._ttl, self._max_keys, self._max_bytes, self._clock = ttl, max_keys, max_bytes, clock

    def get(self, scope: str, key: str) -> KeyRecord | None:
        record = self._records.get((scope, key))
        if record is not None and record.created < self._clock() - self._ttl:
            self.delete(scope, key)
            return None
        return record

    def put(self, record: KeyRecord, *, sync: bool = True) -> None:
        self.delete(record.scope, record.key)
        self._records[(record.scope, record.key)] = record
        self._bytes += record.size
        cutoff = self._clock() - self._ttl
        while self._records and (len(self._records) > self._max_keys or self._bytes > self._max_bytes
                                 or next(iter(self._records.values())).created < cutoff):
            _, oldest = self._records.popitem(last=False)
            self._bytes -= oldest.size

    def delete(self, scope: str, key: str) -> None:
        record = self._records.pop((scope, key), None)
        if record is not None:
            self._bytes -= record.size

    def close(self) -> None:
        self._records.clear()
        self._bytes = 0


_SCHEMA = """
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, state TEXT NOT NULL,
    created REAL NOT NULL, request_id TEXT NOT NULL, status INTEGER NOT NULL, headers TEXT NOT NULL,
    body BLOB NOT NULL, pin TEXT, size INTEGER NOT NULL, PRIMARY KEY (scope, key));
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created);
"""
_COLUMNS = "scope, key, fingerprint, state, created, request_id, status, headers, body, pin, size"
PRUNE_EVERY = 64   # puts between two passes over the bounds (count, bytes); age is pruned on every put


class SqliteKeys(SideTable):
    """The durable store: one connection, one thread, every change committed before the call returns."""

    def __init__(self, path: str, ttl: float, max_keys: int, max_bytes: int = MAX_BYTES,
                 clock: Callable[[], float] = time.time) -> None:
        self._ttl, self._max_keys, self._max_bytes, self._clock = ttl, max_keys, max_bytes, clock
        super().__init__(path, _SCHEMA)
        self._puts = 0

    def get(self, scope: str, key: str) -> KeyRecord | None:
        cutoff = self._clock() - self._ttl

        def read(db: sqlite3.Connection) -> KeyRecord | None:
            row = db.execute(f"SELECT {_COLUMNS} FROM idempotency_keys WHERE scope = ? AND key = ? "
                             "AND created >= ?", (scope, key, cutoff)).fetchone()
            return None if row is None else _record(row)
        return self._run(read)

    def put(self, record: KeyRecord, *, sync: bool = True) -> None:
        """Insert or replace, committed before returning: with ``sync`` flushed to disk (``synchronous=FULL``:
        survives a power cut), else only to the WAL file (``NORMAL``: survives a killed process, which is all
        the "started" mark needs, at no fsync)."""
        self._puts += 1
        full_pass = (self._puts - 1) % PRUNE_EVERY == 0
        cutoff = self._clock() - self._ttl

        def write(db: sqlite3.Connection) -> None:
            db.execute(f"PRAGMA synchronous = {'FULL' if sync else 'NORMAL'}")
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(f"INSERT OR REPLACE INTO idempotency_keys ({_COLUMNS}) VALUES "
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _row(record))
                db.execute("DELETE FROM idempotency_keys WHERE created < ?", (cutoff,))
                if full_pass:
                    self._prune(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        self._run(write)

    def _prune(self, db: sqlite3.Connection) -> None:
        """Oldest first, until both the count and the byte bounds hold."""
        count, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM idempotency_keys").fetchone()
        if count <= self._max_keys and size <= self._max_bytes:
            return
        drop, freed = 0, 0
        for (row_size,) in db.execute("SELECT size FROM idempotency_keys ORDER BY created"):
            if count - drop <= self._max_keys and size - freed <= self._max_bytes:
                break
            drop += 1
            freed += row_size
        db.execute("DELETE FROM idempotency_keys WHERE rowid IN "
                   "(SELECT rowid FROM idempotency_keys ORDER BY created LIMIT ?)", (drop,))

    def delete(self, scope: str, key: str) -> None:
        self._run(lambda db: db.execute("DELETE FROM idempotency_keys WHERE scope = ? AND key = ?", (scope, key)))



def _row(record: KeyRecord) -> tuple[Any, ...]:
    return (record.scope, record.key, record.fingerprint, record.state, record.created, record.request_id,
            record.status, json.dumps(record.headers), record.body,
            None if record.pin is None else json.dumps(record.pin), record.size)


def _record(row: tuple[Any, ...]) -> KeyRecord:
    scope, key, fingerprint, state, created, request_id, status, headers, body, pin, _size = row
    return KeyRecord(scope, key, fingerprint, state, created, request_id, status,
                     tuple((str(n), str(v)) for n, v in json.loads(headers)), bytes(body),
                     None if pin is None else json.loads(pin))


def with_outcome(record: KeyRecord, state: State, *, status: int = 0, headers: tuple[tuple[str, str], ...] = (),
                 body: bytes = b"") -> KeyRecord:
    return replace(record, state=state, status=status, headers=headers, body=body)
