"""The store on the gevent side: restore at start, batched writes while running, a final flush at stop.

- ``start`` (before the watcher starts) takes the lock file, opens the database (a bad file is logged and
  moved aside, then a fresh one is created), loads it and hands it to ``Cache.restore``; then it subscribes
  to the cache and starts the writer.
- The cache listener only appends the batch to a list (no I/O inside the cache's write). The writer
  greenlet wakes on the first pending change, waits ``flush_interval`` so one transaction carries every
  change of the window, and runs the transaction on the store's own thread (a one-thread gevent
  ``ThreadPool``): the hub only waits on it, and sqlite3 releases the GIL while SQLite works.
- A failed write is retried at the next flush with its changes kept; past ``MAX_PENDING`` changes they
  are dropped and the next successful flush rewrites the file from the cache. A write that finds the file
  damaged moves it aside and rewrites a fresh one.
- After an unclean stop (the file's ``clean`` flag is 0) the snapshot is restored but the history starts
  over: numbers the killed process sent but never wrote must not be given to other changes.
- ``stop`` (after the watcher stopped) waits for the writer, writes what is pending, marks the file
  closed in order and releases the lock.

One process at a time: an exclusive ``flock`` on ``<file>.lock``. A new gunicorn worker may start while the
old one still flushes, so the lock is waited for (``lock_timeout``); after that the service runs without
persistence and says so in the log.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import IO

import gevent
import gevent.event
import gevent.lock
import gevent.monkey
from gevent.threadpool import ThreadPool

from app import heap
from app.cache.history import Change
from app.cache.store import Cache
from app.resources import ENGINE_KINDS
from app.store.database import BadStoreFile, Database, Loaded, move_aside

log = logging.getLogger(__name__)

_thread_sleep = gevent.monkey.get_original("time", "sleep")   # the store thread's sleep, not the hub's
MAX_PENDING = 100_000         # changes kept across failed writes before falling back to a rewrite
# After an unclean stop the sequence continues this much higher: more than the changes one flush interval
# can hold (a first full sync of 50,000 tasks is ~60,000 records).
SEQ_JUMP = 1_000_000


def _load_frozen(database: Database) -> Loaded:
    """Load and build the entries with the cyclic collector paused, then freeze them (``app.heap``): a full
    collection triggered by the ~20 objects per decoded task would walk the whole new heap while holding
    the GIL (a 100+ ms stall of the hub at 10,000 tasks); JSON documents hold no cycles, so nothing leaks."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        loaded = database.load()
        loaded.build()
        gc.freeze()
        return loaded
    finally:
        if enabled:
            gc.enable()


@dataclass(slots=True)
class StoreStats:
    restored_objects: int = 0
    restored_records: int = 0
    restore_ms: float = 0.0
    flushes: int = 0
    changes_written: int = 0
    last_flush_ms: float = 0.0
    max_flush_ms: float = 0.0
    write_errors: int = 0
    rewrites: int = 0
    moved_aside: int = 0


class Persister:
    def __init__(self, cache: Cache, path: str, flush_interval: float = 0.5, lock_timeout: float = 15.0) -> None:
        self._cache = cache
        self.path = path
        self.flush_interval = flush_interval
        self.lock_timeout = lock_timeout
        self.stats = StoreStats()
        self.epoch: int | None = None
        self._db: Database | None = None
        self._lock_file: IO[bytes] | None = None
        self._pool: ThreadPool | None = None
        self._pending: list[Change] = []
        self._rewrite = False
        self._wake = gevent.event.Event()
        self._stopping = gevent.event.Event()
        self._flushing = gevent.lock.BoundedSemaphore(1)
        self._writer: gevent.Greenlet | None = None
        self._unsubscribe: object = None
        self._aside: list[tuple[str, str]] = []
        self._started_over: int | None = None

    @property
    def active(self) -> bool:
        """The file is open and being written."""
        return self._db is not None

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        """Open, restore into the (empty) cache, subscribe, start the writer. Any failure to open leaves
        the service running without persistence (logged as an error)."""
        self._pool = ThreadPool(1)
        started = time.monotonic()
        try:
            loaded = self._pool.apply(self._open_and_load)
        except Exception as exc:
            self._log_set_aside()
            log.error("state store unavailable; running without persistence",
                      extra={"path": self.path, "error": f"{type(exc).__name__}: {exc}"})
            self._release_lock()
            return
        self._log_set_aside()
        self._restore(loaded, started)
        unsubscribe = self._cache.subscribe(self._on_changes)
        self._unsubscribe = unsubscribe
        self._writer = gevent.spawn(self._run)

    def _open_and_load(self) -> Loaded:
        """On the store thread: lock, open (moving a bad file aside), load (likewise)."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._take_lock()
        for _attempt in (1, 2):
            try:
                database = Database.open(self.path)
            except BadStoreFile as exc:
                self._set_aside(str(exc))
                continue
            try:
                loaded = _load_frozen(database)
            except BadStoreFile as exc:
                database.close()
                self._set_aside(str(exc))
                continue
            if not loaded.clean:
                self._start_over(database, loaded)
            self._db = database
            return loaded
        raise RuntimeError(f"{self.path} was bad twice in a row")  # pragma: no cover (a race with another tool)

    def _start_over(self, database: Database, loaded: Loaded) -> None:
        """The previous process did not close the file (killed, crashed): it may have sent change numbers
        past the file's ``last_seq`` that it never wrote, and reusing them would let a client resuming
        from one silently miss changes. So the history starts over under a new epoch, ``SEQ_JUMP`` numbers
        further; the snapshot is kept, so the first sync still reports only what changed. Clients resuming
        from an older id get ``sync``. Written at once, so a second crash cannot reuse numbers either."""
        self._started_over = loaded.last_seq
        loaded.records = []
        loaded.last_seq += SEQ_JUMP
        loaded.epoch = max(int(time.time()), loaded.epoch + 1)
        database.start_over(loaded.last_seq, loaded.epoch)

    def _set_aside(self, reason: str) -> None:
        """Move the bad file aside; logged by ``_log_set_aside`` on the hub (this may run on the store
        thread, where gevent's patched logging locks must not be taken)."""
        moved = move_aside(self.path)
        self.stats.moved_aside += 1
        self._aside.append((reason, moved))

    def _log_set_aside(self) -> None:
        notes, self._aside = self._aside, []
        for reason, moved in notes:
            log.error("state store file is corrupt or foreign; moved aside, starting a fresh store",
                      extra={"path": self.path, "moved_to": moved, "reason": reason})

    def _take_lock(self) -> None:
        lock = open(self.path + ".lock", "ab")  # noqa: SIM115 (held open until stop)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    lock.close()
                    raise RuntimeError(f"another process holds {self.path}.lock "
                                       f"(waited {self.lock_timeout:g} s)") from None
                _thread_sleep(0.1)   # on the store thread: the hub runs meanwhile
        self._lock_file = lock

    def _release_lock(self) -> None:
        lock, self._lock_file = self._lock_file, None
        if lock is not None:
            lock.close()   # closing releases the flock

    def _restore(self, loaded: Loaded, started: float) -> None:
        self.epoch = loaded.epoch
        self._cache.restore(loaded.entries, loaded.records, loaded.last_seq)
        if loaded.object_count:
            heap.settle()   # the restored objects live as long as the cache: keep them out of full GCs
        self.stats.restored_objects = loaded.object_count
        self.stats.restored_records = len(self._cache.history)
        self.stats.restore_ms = (time.monotonic() - started) * 1000
        log.info("state restored" if loaded.last_seq else "state store created",
                 extra={"path": self.path, "objects": loaded.object_count, "records": len(self._cache.history),
                        "last_seq": loaded.last_seq, "epoch": loaded.epoch, "clean_shutdown": loaded.clean,
                        "ms": round(self.stats.restore_ms, 1)})
        if self._started_over is not None:
            log.warning("the state store was not closed in order (crash or kill): the snapshot is restored, "
                        "the history starts over under a new epoch; clients resuming get sync",
                        extra={"path": self.path, "file_last_seq": self._started_over,
                               "next_seq": loaded.last_seq + 1, "epoch": loaded.epoch})

    # ------------------------------------------------------------------ writing
    def _on_changes(self, changes: list[Change]) -> None:
        self._pending += changes     # inside the cache's write: no I/O
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._stopping.wait(self.flush_interval)
            if self._stopping.is_set():
                break
            self._wake.clear()
            self.flush()

    def flush(self, on_thread: bool = True) -> None:
        """Write what is pending as one transaction (on the store thread unless ``on_thread`` is False)."""
        with self._flushing:
            database = self._db
            if database is None or not (self._pending or self._rewrite):
                return
            batch, self._pending = self._pending, []
            keep_from = self._cache.history.oldest_seq
            rewrite = self._rewrite
            if rewrite:   # the cache's state, taken on the hub in one go (references, no copies)
                objects = [(kind, entry.raw) for kind in ENGINE_KINDS for entry in self._cache.entries(kind)]
                records = list(self._cache.history.newest_first())[::-1]
                last_seq = self._cache.history.last_seq
            started = time.perf_counter()
            try:
                if rewrite:
                    self._call(on_thread, database.rewrite, objects, records, last_seq)
                else:
                    self._call(on_thread, database.write, batch, keep_from)
            except Exception as exc:
                self._failed(batch, exc)
                return
            took = (time.perf_counter() - started) * 1000
            self._rewrite = False
            self.stats.flushes += 1
            self.stats.rewrites += rewrite
            self.stats.changes_written += len(batch)
            self.stats.last_flush_ms = took
            self.stats.max_flush_ms = max(self.stats.max_flush_ms, took)

    def _call(self, on_thread: bool, function: object, *args: object) -> None:
        assert callable(function)
        if on_thread and self._pool is not None:
            self._pool.apply(function, args)
        else:
            function(*args)

    def _failed(self, batch: list[Change], exc: Exception) -> None:
        self.stats.write_errors += 1
        damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        if damaged:
            self._replace_damaged(str(exc))
        elif len(self._pending) + len(batch) > MAX_PENDING:
            self._pending = []
            self._rewrite = True
        else:
            self._pending[:0] = batch
        log.error("state store write failed; will retry", extra={
            "path": self.path, "error": f"{type(exc).__name__}: {exc}", "changes": len(batch),
            "rewrite": self._rewrite})
        self._wake.set()

    def _replace_damaged(self, reason: str) -> None:
        """The file went bad under us: move it aside and rewrite a fresh one from the cache, same epoch
        (the sequence continues in memory, so ids stay valid). Opens the new file on the hub: a rare path,
        and creating an empty file takes milliseconds."""
        database, self._db = self._db, None
        try:
            if database is not None:
                database.close()
        except Exception:
            log.debug("closing the damaged store failed", exc_info=True)
        self._set_aside(reason)
        self._log_set_aside()
        try:
            self._db = Database.open(self.path, epoch=self.epoch)
        except Exception as exc:
            log.error("state store cannot be re-created; running without persistence",
                      extra={"path": self.path, "error": f"{type(exc).__name__}: {exc}"})
            return
        self._pending = []
        self._rewrite = True

    # ------------------------------------------------------------------ stop
    def stop(self, timeout: float = 10.0) -> None:
        """Write everything pending and close the file in order (call after the watcher stopped)."""
        if self._unsubscribe is not None:
            assert callable(self._unsubscribe)
            self._unsubscribe()
            self._unsubscribe = None
        self._stopping.set()
        self._wake.set()
        if self._writer is not None:
            self._writer.join(timeout)
            self._writer.kill(block=True, timeout=1.0)
            self._writer = None
        database = self._db
        if database is not None:
            self.flush(on_thread=False)   # the writer is gone: nothing else uses the connection
            self._db = None
            try:
                database.close()
            except Exception as exc:
                log.error("closing the state store failed", extra={"path": self.path, "error": str(exc)})
            log.info("state store closed", extra={"path": self.path, "last_seq": self._cache.history.last_seq,
                                                  "flushes": self.stats.flushes})
        self._release_lock()
        if self._pool is not None:
            self._pool.kill()
            self._pool = None
