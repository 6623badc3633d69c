"""What the agents' authorization server keeps: refresh-token families and the generated signing key.

Two backends with one interface (:class:`GrantStore`), like ``app.store.idempotency``:

- :class:`SqliteGrants` — the tables ``oauth_refresh_tokens`` and ``oauth_meta`` in the state store's file
  (``<data_dir>/shoal.db``), through a connection of its own, created with ``CREATE TABLE IF NOT EXISTS``
  once the persister has made the file. Every call runs on a one-thread gevent ``ThreadPool`` (the hub only
  waits) and every change is committed with ``synchronous=FULL`` before the call returns, so a token that
  went out is known after a ``kill -9`` or a restart: agents stay logged in.
- :class:`MemoryGrants` — when persistence is off; nothing survives a restart (agents log in again).

Refresh tokens are stored as their SHA-256 only. A family is every token descended from one authorization
code; a token is single use: :meth:`GrantStore.rotate` marks it used and adds its successor in one
transaction, and presenting a used one again deletes the whole family (RFC 9700 refresh-token reuse
detection). Used tokens are kept until they expire, so a replay is recognised for as long as the token
could have been valid. Rows are bounded by expiry and by :data:`MAX_TOKENS` (oldest dropped first).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol, TypeVar

from app.store.side_table import SideTable

MAX_TOKENS = 100_000    # refresh-token rows kept at most (used ones included)
KEY_NAME = "signing_key"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RefreshRecord:
    """One refresh token (its hash) and the grant it carries on."""

    token_hash: str
    family: str
    client_id: str
    subject: str
    groups: tuple[str, ...]
    resource: str
    created: float
    expires: float
    used: bool = False


class Rotation(Enum):
    ROTATED = "rotated"     # the old token is now used, its successor stored
    UNKNOWN = "unknown"     # no such token (never issued, expired, or its family was revoked)
    REPLAYED = "replayed"   # already used: the whole family is now revoked


class GrantStore(Protocol):
    def get(self, token_hash: str) -> RefreshRecord | None: ...
    def add(self, record: RefreshRecord) -> None: ...
    def rotate(self, old_hash: str, successor: RefreshRecord) -> Rotation: ...
    def revoke_family(self, token_hash: str) -> bool: ...
    def signing_key(self, make: Callable[[], bytes]) -> bytes: ...
    def close(self) -> None: ...


class MemoryGrants:
    """In-process families (persistence off), oldest dropped first past :data:`MAX_TOKENS`."""

    def __init__(self, max_tokens: int = MAX_TOKENS, clock: Callable[[], float] = time.time) -> None:
        self._tokens: dict[str, RefreshRecord] = {}   # insertion order = age
        self._key: bytes | None = None
        self._max, self._clock = max_tokens, clock

    def get(self, token_hash: str) -> RefreshRecord | None:
        record = self._tokens.get(token_hash)
        return record if record is not None and record.expires > self._clock() else None

    def add(self, record: RefreshRecord) -> None:
        self._tokens[record.token_hash] = record
        self._prune()

    def rotate(self, old_hash: str, successor: RefreshRecord) -> Rotation:
        old = self.get(old_hash)
        if old is None:
            return Rotation.UNKNOWN
        if old.used:
            self._drop_family(old.family)
            return Rotation.REPLAYED
        self._tokens[old_hash] = replace(old, used=True)
        self.add(successor)
        return Rotation.ROTATED

    def revoke_family(self, token_hash: str) -> bool:
        record = self._tokens.get(token_hash)
        if record is None:
            return False
        self._drop_family(record.family)
        return True

    def signing_key(self, make: Callable[[], bytes]) -> bytes:
        if self._key is None:
            self._key = make()
        return self._key

    def close(self) -> None:
        self._tokens.clear()

    def _drop_family(self, family: str) -> None:
        for token_hash in [h for h, r in self._tokens.items() if r.family == family]:
            del self._tokens[token_hash]

    def _prune(self) -> None:
        now = self._clock()
        for token_hash in [h for h, r in self._tokens.items() if r.expires <= now]:
            del self._tokens[token_hash]
        while len(self._tokens) > self._max:
            del self._tokens[next(iter(self._tokens))]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY, family TEXT NOT NULL, client_id TEXT NOT NULL, subject TEXT NOT NULL,
    groups TEXT NOT NULL, resource TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,
    used INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_family ON oauth_refresh_tokens (family);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_expires ON oauth_refresh_tokens (expires);
CREATE TABLE IF NOT EXISTS oauth_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
"""
_COLUMNS = "token_hash, family, client_id, subject, groups, resource, created, expires, used"


class SqliteGrants(SideTable):
    """The durable store: one connection, one thread, every change committed before the call returns."""

    def __init__(self, path: str, max_tokens: int = MAX_TOKENS, clock: Callable[[], float] = time.time) -> None:
        self._max, self._clock = max_tokens, clock
        super().__init__(path, _SCHEMA)

    def _write(self, change: Callable[[sqlite3.Connection], T]) -> T:
        """``change`` in one committed transaction, expired rows pruned in the same one."""
        now = self._clock()

        def job(db: sqlite3.Connection) -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = change(db)
                db.execute("DELETE FROM oauth_refresh_tokens WHERE expires <= ?", (now,))
                db.execute("DELETE FROM oauth_refresh_tokens WHERE rowid IN (SELECT rowid FROM "
                           "oauth_refresh_tokens ORDER BY created DESC LIMIT -1 OFFSET ?)", (self._max,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return result
        return self._run(job)

    def get(self, token_hash: str) -> RefreshRecord | None:
        now = self._clock()

        def read(db: sqlite3.Connection) -> RefreshRecord | None:
            row = db.execute(f"SELECT {_COLUMNS} FROM oauth_refresh_tokens WHERE token_hash = ? AND expires > ?",
                             (token_hash, now)).fetchone()
            return None if row is None else _record(row)
        return self._run(read)

    def add(self, record: RefreshRecord) -> None:
        self._write(lambda db: _insert(db, record))

    def rotate(self, old_hash: str, successor: RefreshRecord) -> Rotation:
        now = self._clock()

        def change(db: sqlite3.Connection) -> Rotation:
            row = db.execute("SELECT family, used FROM oauth_refresh_tokens WHERE token_hash = ? AND expires > ?",
                             (old_hash, now)).fetchone()
            if row is None:
                return Rotation.UNKNOWN
            family, used = row
            if used:
                db.execute("DELETE FROM oauth_refresh_tokens WHERE family = ?", (family,))
                return Rotation.REPLAYED
            db.execute("UPDATE oauth_refresh_tokens SET used = 1 WHERE token_hash = ?", (old_hash,))
            _insert(db, successor)
            return Rotation.ROTATED
        return self._write(change)

    def revoke_family(self, token_hash: str) -> bool:
        def change(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT family FROM oauth_refresh_tokens WHERE token_hash = ?", (token_hash,)).fetchone()
            if row is None:
                return False
            db.execute("DELETE FROM oauth_refresh_tokens WHERE family = ?", (row[0],))
            return True
        return self._write(change)

    def signing_key(self, make: Callable[[], bytes]) -> bytes:
        """The stored key, or ``make()`` stored now (a key already there wins)."""
        def change(db: sqlite3.Connection) -> bytes:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT value FROM oauth_meta WHERE name = ?", (KEY_NAME,)).fetchone()
                if row is None:
                    key = make()
                    db.execute("INSERT INTO oauth_meta (name, value) VALUES (?, ?)", (KEY_NAME, key))
                else:
                    key = bytes(row[0])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return key
        return self._run(change)



def _insert(db: sqlite3.Connection, record: RefreshRecord) -> None:
    db.execute(f"INSERT OR REPLACE INTO oauth_refresh_tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (record.token_hash, record.family, record.client_id, record.subject, json.dumps(record.groups),
                record.resource, record.created, record.expires, int(record.used)))


def _record(row: tuple[Any, ...]) -> RefreshRecord:
    token_hash, family, client_id, subject, groups, resource, created, expires, used = row
    return RefreshRecord(token_hash, family, client_id, subject, tuple(str(g) for g in json.loads(groups)),
                         resource, created, expires, bool(used))
