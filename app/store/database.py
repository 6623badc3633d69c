"""The SQLite file: schema, checks at open, moving a bad file aside, loading, batched writes.

Everything here is blocking and runs on the store's own thread (``app.store.persister``), never on the
gevent hub. One connection, used by one thread at a time.

Tables (schema version ``SCHEMA_VERSION`` in ``PRAGMA user_version``, ``APPLICATION_ID`` in
``PRAGMA application_id``):

- ``meta``: ``epoch`` (when this sequence started, whole seconds: part of feed entry ids), ``last_seq``
  (the newest change number written, or the end of a gap: the number the sequence continues after),
  ``clean`` (1 after an orderly close with nothing left unwritten, 0 while open).
- ``history``: one row per change record of the cache's ring (seq, kind, action, id, name, timestamp,
  before/after JSON, estimated size), trimmed to what the ring keeps.
- ``objects``: the last cache snapshot, one row per engine object (raw JSON), kept current from the change
  records (upsert on create/update, delete on remove), never rewritten whole in normal operation.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.cache.entries import Entry, Raw, build_entry, raw_identity
from app.cache.history import RELATED_SHARE, Action, Change, sequence_base
from app.resources import ENGINE_KINDS, ResourceKind

APPLICATION_ID = 0x53484F4C        # "SHOL": marks the file as this service's
SCHEMA_VERSION = 1
FILE_NAME = "shoal.db"
_HEADER = b"SQLite format 3\x00"
_SIDE_FILES = ("-wal", "-shm")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE history (
    seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, action TEXT NOT NULL, object_id TEXT NOT NULL,
    name TEXT NOT NULL, ts REAL NOT NULL, before TEXT, after TEXT, size INTEGER NOT NULL);
CREATE TABLE objects (kind TEXT NOT NULL, id TEXT NOT NULL, raw TEXT NOT NULL, PRIMARY KEY (kind, id));
"""
_TABLES = {"meta", "history", "objects"}
# The audit trail's bounds (``storage.history_retention``, ``storage.history_max_bytes``) and how the trim
# works: at most TRIM_BATCHES x TRIM_BATCH of the oldest records examined per write, so one transaction
# stays short whatever the file holds (a backlog goes over several writes).
DEFAULT_RETENTION = 30 * 86400.0
DEFAULT_ARCHIVE_BYTES = 1024**3
TRIM_BATCH = 1_000
TRIM_BATCHES = 20
COLUMNS = "seq, kind, action, object_id, name, ts, before, after, size"
Row = tuple[Any, ...]


class BadStoreFile(Exception):
    """The file is not this service's store (not SQLite, another application's, a newer schema) or is
    damaged (failed integrity check, unreadable content). It is moved aside, never deleted."""


@dataclass(slots=True)
class Loaded:
    epoch: int
    last_seq: int
    clean: bool                                   # the previous process closed the file in order
    objects: dict[ResourceKind, list[Raw]] = field(default_factory=dict)
    records: list[Change] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)   # the objects built for the cache (``build``)

    @property
    def object_count(self) -> int:
        return sum(len(raws) for raws in self.objects.values())

    def build(self) -> None:
        """Derive the cache entries here (on the store thread), so the hub only places them."""
        self.entries = [build_entry(kind, raw) for kind, raws in self.objects.items() for raw in raws]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def change_from_row(row: Row, decode: Callable[[tuple[str, str], str | None], Any] | None = None) -> Change:
    """One ``history`` row (columns ``COLUMNS``) as a record; ``decode`` may share decoded objects."""
    seq, kind, action, object_id, name, ts, before, after, size = row
    key = (kind, object_id)
    if decode is None:
        return Change(int(seq), ResourceKind(kind), Action(action), str(object_id), str(name), float(ts),
                      None if before is None else json.loads(before), None if after is None else json.loads(after),
                      int(size))
    return Change(int(seq), ResourceKind(kind), Action(action), str(object_id), str(name), float(ts),
                  decode(key, before), decode(key, after), int(size))


class Database:
    def __init__(self, connection: sqlite3.Connection, path: str, retention: float = DEFAULT_RETENTION,
                 max_history_bytes: int = DEFAULT_ARCHIVE_BYTES) -> None:
        self._db = connection
        self.path = path
        self.was_clean = True      # the previous process closed the file in order (a new file: trivially)
        self.retention = retention                  # seconds a record is kept (the audit trail's age bound)
        self.max_history_bytes = max_history_bytes  # estimated bytes of records kept (its size bound)
        self._history_bytes: int | None = None      # their sum, known after the first trim (None: recount)
        self.trimmed = 0                            # records removed by the bounds since opened

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: str, epoch: int | None = None, retention: float = DEFAULT_RETENTION,
             max_history_bytes: int = DEFAULT_ARCHIVE_BYTES) -> Database:
        """Open (or create) the store file and check it is ours and sound.

        :param epoch: for a new file, the epoch to record (default: now). A new file's sequence starts at
            :func:`~app.cache.history.sequence_base`, above every number of an earlier sequence.
        :raises BadStoreFile: the file exists but must not be used (the caller moves it aside).
        :raises sqlite3.OperationalError, OSError: the file cannot be opened or created at all.
        """
        _check_header(path)
        if path != ":memory:":
            # Owner-only before SQLite creates it (its WAL and shm files copy the mode): service specs carry
            # environment variables, which may hold credentials.
            os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        connection = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        try:
            database = cls(connection, path, retention, max_history_bytes)
            database._prepare(epoch)
        except sqlite3.DatabaseError as exc:
            connection.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise BadStoreFile(f"SQLite refused the file: {exc}") from None
        except BaseException:
            connection.close()
            raise
        return database

    def _prepare(self, epoch: int | None) -> None:
        db = self._db
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if application_id == 0 and version == 0 and not tables:
            self._create(epoch)
            return
        if application_id != APPLICATION_ID:
            raise BadStoreFile(f"a SQLite database of another application (application_id {application_id:#x}, "
                               f"tables {sorted(tables)[:5]})")
        if version != SCHEMA_VERSION:
            raise BadStoreFile(f"schema version {version}, this version reads {SCHEMA_VERSION}")
        if not tables >= _TABLES:
            raise BadStoreFile(f"tables missing: {sorted(_TABLES - tables)}")
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise BadStoreFile(f"integrity check failed: {'; '.join(problems)}")
        self._tune()
        clean = db.execute("SELECT value FROM meta WHERE key = 'clean'").fetchone()
        self.was_clean = clean is not None and clean[0] == "1"
        db.execute("UPDATE meta SET value = '0' WHERE key = 'clean'")

    def _tune(self) -> None:
        """WAL (readers never block the writer; a commit is one append), synchronous NORMAL (durable across
        a crash of the process; a power loss may drop the last commits), and a bound on the WAL file left
        after checkpoints (the first full sync writes the whole cluster at once)."""
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(f"PRAGMA journal_size_limit = {16 * 1024 * 1024}")

    def _create(self, epoch: int | None) -> None:
        db = self._db
        self._tune()
        with self._transaction():
            for statement in _SCHEMA.strip().split(";"):
                if statement.strip():
                    db.execute(statement)
            db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                           [("epoch", str(int(time.time()) if epoch is None else epoch)),
                            ("last_seq", str(sequence_base())), ("clean", "0")])
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------------ reading
    def load(self, keep: int | None = None, keep_bytes: int | None = None) -> Loaded:
        """The snapshot, the sequence and the newest records the ring keeps (None: all): per lane of the
        ring (``app.cache.history``), the newest ``keep`` changes of objects within ``keep_bytes`` and the
        newest related changes within a ``RELATED_SHARE`` of both; the archive beyond stays in the file
        (read page by page, ``app.store.archive``). Objects whose
        JSON equals a record's share one decoded dict, as they did in the process that wrote them, so a
        restored ring does not hold three copies of each object.

        :raises BadStoreFile: content this version cannot read (the file is then moved aside)."""
        try:
            return self._load(keep, keep_bytes)
        except (ValueError, KeyError, TypeError) as exc:   # JSONDecodeError is a ValueError
            raise BadStoreFile(f"unreadable content: {type(exc).__name__}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise BadStoreFile(f"unreadable content: {exc}") from None

    def _load(self, keep: int | None, keep_bytes: int | None) -> Loaded:
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        loaded = Loaded(int(meta["epoch"]), int(meta["last_seq"]), self.was_clean)
        latest: dict[tuple[str, str], tuple[str, Any]] = {}   # (kind, id) → (JSON text, decoded) of the newest

        def decode(key: tuple[str, str], text: str | None) -> Any:
            if text is None:
                return None
            known = latest.get(key)
            if known is not None and known[0] == text:
                return known[1]
            value = json.loads(text)
            latest[key] = (text, value)
            return value

        related = Action.REF_CHANGED.value
        newest = self._newest("action != ?", related, keep, keep_bytes)
        if keep is not None:
            newest += self._newest("action = ?", related, max(1, keep // RELATED_SHARE),
                                   None if keep_bytes is None else max(1, keep_bytes // RELATED_SHARE))
        newest.sort(key=lambda row: int(row[0]))
        loaded.records = [change_from_row(row, decode) for row in newest]
        for kind_text, object_id, text in self._db.execute("SELECT kind, id, raw FROM objects"):
            kind = ResourceKind(kind_text)
            if kind not in ENGINE_KINDS:
                raise ValueError(f"{kind.value} objects are derived, not stored")
            raw = decode((kind_text, object_id), text)
            if not isinstance(raw, dict):
                raise TypeError(f"{kind.value} {object_id} is not a JSON object")
            loaded.objects.setdefault(kind, []).append(raw)
        return loaded

    def _newest(self, where: str, value: str, keep: int | None, keep_bytes: int | None) -> list[Row]:
        """The newest rows matching ``where`` up to ``keep`` rows within ``keep_bytes`` (the newest always)."""
        if keep is None:
            return self._db.execute(f"SELECT {COLUMNS} FROM history ORDER BY seq").fetchall()
        rows: list[Row] = []
        total = 0
        for row in self._db.execute(f"SELECT {COLUMNS} FROM history WHERE {where} ORDER BY seq DESC", (value,)):
            if len(rows) >= keep or (keep_bytes is not None and rows and total + int(row[8]) > keep_bytes):
                break
            rows.append(row)
            total += int(row[8])
        return rows

    # ------------------------------------------------------------------ writing
    def write(self, changes: Sequence[Change], *, now: float | None = None) -> None:
        """One transaction: the records, the snapshot rows they change (net per object), the history
        trimmed to its age and byte bounds (``trim``), the new ``last_seq``."""
        if changes:
            with self._transaction():
                self._records(changes, snapshot=True)
                self._history_bytes = None if self._history_bytes is None else \
                    self._history_bytes + sum(change.size for change in changes)
                self.trim(now)
                self._set_last_seq(changes[-1].seq)

    def trim(self, now: float | None = None) -> int:
        """Remove the oldest records older than ``retention`` or past ``max_history_bytes`` (the newest are
        kept), at most ``TRIM_BATCHES`` batches of ``TRIM_BATCH``; returns how many were removed. Runs inside
        the caller's transaction when there is one."""
        if not self._db.in_transaction:
            with self._transaction():
                return self.trim(now)
        db = self._db
        if self._history_bytes is None:
            self._history_bytes = int(db.execute("SELECT COALESCE(SUM(size), 0) FROM history").fetchone()[0])
        cutoff = (time.time() if now is None else now) - self.retention
        oldest = db.execute("SELECT ts FROM history ORDER BY seq LIMIT 1").fetchone()
        if oldest is None or (oldest[0] >= cutoff and self._history_bytes <= self.max_history_bytes):
            return 0   # the usual case: one row read
        removed = 0
        for _batch in range(TRIM_BATCHES):
            rows = db.execute("SELECT seq, ts, size FROM history WHERE seq < (SELECT MAX(seq) FROM history) "
                              "ORDER BY seq LIMIT ?", (TRIM_BATCH,)).fetchall()   # the newest always stays
            last, freed, count = None, 0, 0
            for seq, ts, size in rows:
                if ts >= cutoff and self._history_bytes - freed <= self.max_history_bytes:
                    break
                last, freed, count = seq, freed + int(size), count + 1
            if last is None:
                break
            db.execute("DELETE FROM history WHERE seq <= ?", (last,))
            self._history_bytes -= freed
            removed += count
            if count < len(rows):
                break
        self.trimmed += removed
        return removed

    def rewrite(self, objects: Iterable[tuple[ResourceKind, Raw]], records: Sequence[Change], last_seq: int) -> None:
        """Replace the snapshot with the cache's current state and add the ring's records (after writes
        were lost: a failing disk). The archive keeps what it has: only the dropped records are missing."""
        with self._transaction():
            self._db.execute("DELETE FROM objects")
            self._db.executemany("INSERT OR REPLACE INTO objects (kind, id, raw) VALUES (?, ?, ?)",
                                 [(kind.value, _object_id(kind, raw), _dumps(raw)) for kind, raw in objects])
            self._records(records, snapshot=False)
            self._history_bytes = None   # rows replaced: recount
            self.trim()
            self._set_last_seq(last_seq)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT; on any failure (COMMIT's included: "database or disk is full" may come
        from it) roll back if a transaction is still open, and raise the *first* error: a ROLLBACK that
        fails too must not hide why, nor leave a transaction open for the next BEGIN to trip on."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            self._history_bytes = None   # rolled back: recount at the next trim
            if self._db.in_transaction:
                with suppress(sqlite3.Error):   # the error being raised is the one that says why
                    self._db.execute("ROLLBACK")
            raise

    def continue_after(self, last_seq: int) -> None:
        """Record where the sequence goes on (the end of the gap after an unclean stop), before any number
        past it is handed out: a second crash then cannot reuse what this process sends."""
        with self._transaction():
            self._set_last_seq(last_seq)

    def _set_last_seq(self, seq: int) -> None:
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (str(seq),))

    def _records(self, changes: Sequence[Change], snapshot: bool) -> None:
        texts: dict[int, str] = {}   # id(dict) → JSON: an update's before is the previous record's after

        def text(value: Any) -> str | None:
            if value is None:
                return None
            known = texts.get(id(value))
            if known is None:
                known = texts[id(value)] = _dumps(value)
            return known

        rows = []
        objects: dict[tuple[str, str], str | None] = {}
        for change in changes:
            after = text(change.after)
            rows.append((change.seq, change.kind.value, change.action.value, change.id, change.name,
                         change.timestamp, text(change.before), after, change.size))
            if snapshot and change.kind in ENGINE_KINDS and change.action is not Action.REF_CHANGED:
                objects[(change.kind.value, change.id)] = None if change.action is Action.REMOVE else after
        db = self._db
        db.executemany("INSERT OR REPLACE INTO history (seq, kind, action, object_id, name, ts, before, after, "
                       "size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.executemany("INSERT INTO objects (kind, id, raw) VALUES (?, ?, ?) "
                       "ON CONFLICT (kind, id) DO UPDATE SET raw = excluded.raw",
                       [(kind, object_id, raw) for (kind, object_id), raw in objects.items() if raw is not None])
        db.executemany("DELETE FROM objects WHERE kind = ? AND id = ?",
                       [key for key, raw in objects.items() if raw is None])

    def close(self, clean: bool = True) -> None:
        """Fold the WAL back into the file and close it; with ``clean`` mark an orderly close first. The
        caller passes ``clean=False`` whenever a change is left unwritten: the next start must then treat
        the file as after a crash (continue past a gap), never reuse the numbers it did not record."""
        try:
            if clean:
                self._db.execute("UPDATE meta SET value = '1' WHERE key = 'clean'")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()


def _object_id(kind: ResourceKind, raw: Raw) -> str:
    return raw_identity(kind, raw)[0]


def _check_header(path: str) -> None:
    """A non-empty file that does not start with the SQLite header is not ours (SQLite itself would only
    say "file is not a database" on the first query)."""
    try:
        with open(path, "rb") as file:
            header = file.read(len(_HEADER))
    except FileNotFoundError:
        return
    if header and header != _HEADER:
        raise BadStoreFile("not a SQLite database (unexpected file header)")


def move_aside(path: str, now: float | None = None) -> str:
    """Rename the file (and its WAL and shared-memory files) with a UTC timestamp suffix; returns the new
    name. Never deletes: the operator decides what to do with it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = f"{path}.bad-{stamp}"
    counter = 1
    while os.path.exists(target):
        counter += 1
        target = f"{path}.bad-{stamp}-{counter}"
    os.rename(path, target)
    for suffix in _SIDE_FILES:
        if os.path.exists(path + suffix):
            os.rename(path + suffix, target + suffix)
    return target


def store_path(data_dir: str) -> str:
    return str(Path(data_dir) / FILE_NAME)
