"""The store on the gevent side: restore at start, batched writes while running, a final flush at stop.

- ``start`` (before the watcher starts) takes the lock (``app.store.lock``), opens the database (a bad file
  is logged and moved aside, then a fresh one is created), loads it and hands it to ``Cache.restore``; then
  it subscribes to the cache and starts the writer.
- The cache listener only appends the batch to a list (no I/O inside the cache's write). The writer
  greenlet wakes on the first pending change, waits ``flush_interval`` so one transaction carries every
  change of the window, and runs the transaction on the store's own thread (a one-thread gevent
  ``ThreadPool``): the hub only waits on it, and sqlite3 releases the GIL while SQLite works.
- A failed write keeps its changes for the next attempt (after a growing delay, ``app.store.health``);
  past ``max_pending_bytes`` (default: the history ring's byte bound: memory stays bounded while the disk
  fails) they are dropped and the next successful flush rewrites the snapshot from the cache and adds the
  ring's records (the audit trail keeps a hole for the dropped ones). A write that finds the file damaged
  moves it aside and rewrites a fresh one.
- The file is also the audit trail (``Database.trim``: kept by age and bytes); ``older`` and ``record`` read
  it on the store thread for history pages past the ring (``app.history.archive``).
- After an unclean stop (the file's ``clean`` flag is 0: a kill, a crash, or a stop whose last writes
  failed) every committed record is kept and the numbering continues past a gap (:func:`resume_after_gap`)
  that covers every number the dead process may have sent without committing it; positions inside the gap
  get ``sync`` (``History.since``).
- ``stop`` (after the watcher stopped) waits for the writer, writes what is pending, marks the file closed
  in order only if nothing is left unwritten, and releases the lock.
"""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import IO, TypeVar, cast

import gevent
import gevent.event
import gevent.lock
import gevent.monkey
from gevent.threadpool import ThreadPool

from app import heap
from app.cache.history import Change, sequence_base
from app.cache.store import Cache
from app.resources import ENGINE_KINDS
from app.store.archive import ANY, ArchiveReader, Flat, Window
from app.store.database import DEFAULT_ARCHIVE_BYTES, DEFAULT_RETENTION, BadStoreFile, Database, Loaded, move_aside
from app.store.health import StoreState, StoreStatus, WriteHealth, describe_error
from app.store.lock import DataDirInUse, take_lock

log = logging.getLogger(__name__)

_thread_sleep = gevent.monkey.get_original("time", "sleep")   # the store thread's sleep, not the hub's
# When the clock lies behind the committed numbers (it went back), the numbering after an unclean stop goes
# this far past the committed end instead: more than the changes one flush interval can hold (a first full
# sync of 50,000 tasks is ~60,000 records).
SEQ_MARGIN = 1_000_000


def resume_after_gap(committed: int, now: float | None = None) -> int:
    """Where the numbering goes on after an unclean stop whose file ends at ``committed``.

    Every number ever handed out is at most the microseconds since the Unix epoch at that moment (sequences
    start at :func:`~app.cache.history.sequence_base` and take less than one number per microsecond), so
    the clock now lies past every number the dead process may have sent. The gap never runs ahead of the
    clock while the clock is sane (that would break the rule for the next crash); only a clock behind the
    committed numbers (it went back) gets ``SEQ_MARGIN`` past them."""
    clock = sequence_base(now)
    return clock if clock > committed else committed + SEQ_MARGIN


T = TypeVar("T")


def _outcome(function: Callable[..., T], args: tuple[object, ...]) -> tuple[T | None, Exception | None]:
    """Run on the store thread and hand back the result *or* the exception: raised inside the pool, gevent
    would print its traceback to stderr (a full disk would then repeat one per retry)."""
    try:
        return function(*args), None
    except Exception as exc:
        return None, exc


def _load_frozen(database: Database, keep: int | None, keep_bytes: int | None) -> Loaded:
    """Load and build the entries with the cyclic collector paused, then freeze them (``app.heap``): a full
    collection triggered by the ~20 objects per decoded task would walk the whole new heap while holding
    the GIL (a 100+ ms stall of the hub at 10,000 tasks); JSON documents hold no cycles, so nothing leaks."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        loaded = database.load(keep, keep_bytes)
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
    dropped_changes: int = 0


class Persister:
    def __init__(self, cache: Cache, path: str, flush_interval: float = 0.5, lock_timeout: float = 15.0,
                 max_pending_bytes: int | None = None, *, ring_size: int = 10_000,
                 retention: float = DEFAULT_RETENTION, max_history_bytes: int = DEFAULT_ARCHIVE_BYTES) -> None:
        self._cache = cache
        self.path = path
        self.ring_size = ring_size              # changes restored into the ring (``server.history_size``)
        self.retention = retention              # the audit trail's bounds in the file (``Database.trim``)
        self.max_history_bytes = max_history_bytes
        self._reader = ArchiveReader(path)      # older pages, on the store thread (``older``, ``record``)
        self._inflight: list[Change] = []       # the batch being written (neither pending nor committed)
        self.flush_interval = flush_interval
        self.lock_timeout = lock_timeout
        self.max_pending_bytes = cache.history.max_bytes if max_pending_bytes is None else max_pending_bytes
        self.stats = StoreStats()
        self.health = WriteHealth(path)
        self.epoch: int | None = None
        self._db: Database | None = None
        self._lock_file: IO[bytes] | None = None
        self._pool: ThreadPool | None = None
        self._pending: list[Change] = []
        self._pending_bytes = 0
        self._rewrite = False
        self._wake = gevent.event.Event()
        self._stopping = gevent.event.Event()
        self._flushing = gevent.lock.BoundedSemaphore(1)
        self._writer: gevent.Greenlet | None = None
        self._unsubscribe: object = None
        self._aside: list[tuple[str, str]] = []
        self._gap: tuple[int, int, str | None] | None = None   # committed end, resumed at, why not recorded
        self._started = False

    @property
    def active(self) -> bool:
        """The file is open and being written."""
        return self._db is not None

    def status(self) -> StoreStatus:
        if self._db is None:
            state = StoreState.UNAVAILABLE
        else:
            state = StoreState.FAILING if self.health.failing else StoreState.OK
        return StoreStatus(state, len(self._pending), self._pending_bytes, self.health.failing_since,
                           self.health.last_error, self.stats.write_errors, self.stats.dropped_changes)

    # ------------------------------------------------------------------ start
    def start(self) -> bool:
        """Open, restore into the (empty) cache, subscribe, start the writer; True when the cache was restored.
        A file that cannot be opened leaves the service running without persistence (logged as an error).

        :raises DataDirInUse: another service holds the data directory (the caller ends the process)."""
        self._pool = ThreadPool(1)
        started = time.monotonic()
        try:
            loaded = self._on_thread(self._open_and_load)
        except DataDirInUse:
            self._stop_pool()
            raise
        except Exception as exc:
            self._log_set_aside()
            log.error("state store unavailable; running without persistence",
                      extra={"path": self.path, "error": describe_error(exc)})
            self._release_lock()
            self._stop_pool()
            return False
        self._log_set_aside()
        self._restore(loaded, started)
        unsubscribe = self._cache.subscribe(self._on_changes)
        self._unsubscribe = unsubscribe
        self._writer = gevent.spawn(self._run)
        return True

    def _open_and_load(self) -> Loaded:
        """On the store thread: lock, open (moving a bad file aside), load (likewise)."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._lock_file = take_lock(self.path + ".lock", self.lock_timeout, _thread_sleep)
        for _attempt in (1, 2):
            try:
                database = Database.open(self.path, retention=self.retention,
                                         max_history_bytes=self.max_history_bytes)
            except BadStoreFile as exc:
                self._set_aside(str(exc))
                continue
            try:
                loaded = _load_frozen(database, self.ring_size, self._cache.history.max_bytes)
            except BadStoreFile as exc:
                database.close(clean=False)
                self._set_aside(str(exc))
                continue
            if not loaded.clean:
                self._continue_past_gap(database, loaded)
            with suppress(sqlite3.OperationalError):   # a full disk: the next write trims again
                database.trim()
            self._db = database
            return loaded
        raise RuntimeError(f"{self.path} was bad twice in a row")  # pragma: no cover (a race with another tool)

    def _continue_past_gap(self, database: Database, loaded: Loaded) -> None:
        """The previous process did not close the file in order (killed, crashed, or its last writes
        failed): it may have sent numbers past the file's ``last_seq`` that it never committed. Every
        committed record is kept (same epoch, so feed ids stay), and the numbering continues past a gap
        covering those numbers; a client resuming from one of them gets ``sync``. The new end is recorded at
        once, so a second crash cannot reuse what this process sends (if that write fails, the clock rule
        of :func:`resume_after_gap` still holds at the next start)."""
        committed = loaded.last_seq
        loaded.last_seq = resume_after_gap(committed)
        why = None
        try:
            database.continue_after(loaded.last_seq)
        except sqlite3.Error as exc:
            why = describe_error(exc)
        self._gap = (committed, loaded.last_seq, why)

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

    def _release_lock(self) -> None:
        lock, self._lock_file = self._lock_file, None
        if lock is not None:
            lock.close()   # closing releases the flock

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.kill()
            self._pool = None

    def _restore(self, loaded: Loaded, started: float) -> None:
        self.epoch = loaded.epoch
        self._cache.restore(loaded.entries, loaded.records, loaded.last_seq)
        if loaded.object_count:
            heap.settle()   # the restored objects live as long as the cache: keep them out of full GCs
        self.stats.restored_objects = loaded.object_count
        self.stats.restored_records = len(self._cache.history)
        self.stats.restore_ms = (time.monotonic() - started) * 1000
        log.info("state restored" if loaded.object_count or loaded.records else "state store opened",
                 extra={"path": self.path, "objects": loaded.object_count, "records": len(self._cache.history),
                        "last_seq": loaded.last_seq, "epoch": loaded.epoch, "clean_shutdown": loaded.clean,
                        "ms": round(self.stats.restore_ms, 1)})
        if self._gap is not None:
            committed, resumed, why = self._gap
            log.warning("the state store was not closed in order (crash, kill or failed last writes): every "
                        "committed record is kept; numbering continues past a gap, clients resuming inside it "
                        "get sync", extra={"path": self.path, "committed_seq": committed, "next_seq": resumed + 1,
                                           "epoch": loaded.epoch, "gap_not_recorded": why})

    # ------------------------------------------------------------------ writing
    def _on_changes(self, changes: list[Change]) -> None:
        """Inside the cache's write: no I/O. Past the byte bound (memory must stay bounded while writes
        fail) drop what is pending and rewrite the snapshot and the ring from the cache instead."""
        self._pending += changes
        self._pending_bytes += sum(change.size for change in changes)
        if self._pending_bytes > self.max_pending_bytes:
            self._drop_pending()
        self._wake.set()

    def _drop_pending(self) -> None:
        self.stats.dropped_changes += len(self._pending)
        self._pending = []
        self._pending_bytes = 0
        self._rewrite = True

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._stopping.wait(self.health.retry_delay(self.flush_interval))
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
            batch_bytes, self._pending_bytes = self._pending_bytes, 0
            rewrite, self._rewrite = self._rewrite, False
            if rewrite:   # the cache's state, taken on the hub in one go (references, no copies)
                objects = [(kind, entry.raw) for kind in ENGINE_KINDS for entry in self._cache.entries(kind)]
                records = list(self._cache.history.newest_first())[::-1]
                last_seq = self._cache.history.last_seq
            started = time.perf_counter()
            self._inflight = batch
            try:
                if rewrite:
                    self._call(on_thread, database.rewrite, objects, records, last_seq)
                else:
                    self._call(on_thread, database.write, batch)
            except Exception as exc:
                self._inflight = []
                self._failed(batch, batch_bytes, rewrite, exc)
                return
            self._inflight = []
            took = (time.perf_counter() - started) * 1000
            self.health.succeeded()
            self.stats.flushes += 1
            self.stats.rewrites += rewrite
            self.stats.changes_written += len(batch)
            self.stats.last_flush_ms = took
            self.stats.max_flush_ms = max(self.stats.max_flush_ms, took)

    def _call(self, on_thread: bool, function: Callable[..., None], *args: object) -> None:
        if on_thread and self._pool is not None:
            self._on_thread(function, *args)
        else:
            function(*args)

    def _on_thread(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the store thread; its exception is raised here, on the hub."""
        assert self._pool is not None
        outcome: tuple[T | None, Exception | None] = self._pool.apply(_outcome, (function, args))
        result, error = outcome
        if error is not None:
            raise error
        return cast(T, result)   # None only with an error

    def _failed(self, batch: list[Change], batch_bytes: int, rewrite: bool, exc: Exception) -> None:
        """Keep what failed for the next attempt (a rewrite is simply redone from the cache's state then)."""
        self.stats.write_errors += 1
        damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        if damaged:
            self._replace_damaged(describe_error(exc))
        elif rewrite:
            self._rewrite = True
        else:
            self._pending[:0] = batch
            self._pending_bytes += batch_bytes
            if self._pending_bytes > self.max_pending_bytes:
                self._drop_pending()
        self.health.failed(exc, len(batch), self._pending_bytes, self._rewrite)
        self._wake.set()

    def _replace_damaged(self, reason: str) -> None:
        """The file went bad under us: move it aside and rewrite a fresh one from the cache, same epoch
        (the sequence continues in memory, so ids stay valid). Opens the new file on the hub: a rare path,
        and creating an empty file takes milliseconds."""
        database, self._db = self._db, None
        try:
            if database is not None:
                database.close(clean=False)
        except Exception:
            log.debug("closing the damaged store failed", exc_info=True)
        self._set_aside(reason)
        self._log_set_aside()
        self._reader.reset()
        try:
            self._db = Database.open(self.path, epoch=self.epoch, retention=self.retention,
                                     max_history_bytes=self.max_history_bytes)
        except Exception as exc:
            log.error("state store cannot be re-created; running without persistence",
                      extra={"path": self.path, "error": describe_error(exc)})
            return
        self._pending = []
        self._pending_bytes = 0
        self._rewrite = True

    # ------------------------------------------------------------------ reading the archive
    def older(self, before: int, limit: int, flat: Flat = ANY, window: int = 5_000) -> Window:
        """``ArchiveReader.older`` on the store thread, merged with the records not written yet (pending or
        being written) in the same window, so a record that left the ring before its write is still found.
        An empty window at the start without an open file.

        :raises sqlite3.Error: the file could not be read."""
        if self._db is None or self._pool is None:
            return Window([], 0, True)
        # unwritten before the read as well as after it: a flush that writes them while the read waits (and
        # clears its in-flight list before this greenlet resumes) leaves them in neither the read nor the lists
        waiting = (*self._inflight, *self._pending)
        found: Window = self._on_thread(self._reader.older, before, limit, flat, window)
        unwritten = [change for change in (*waiting, *self._inflight, *self._pending)
                     if found.low <= change.seq < before and flat.matches(change)]
        if not unwritten:
            return found
        merged = {change.seq: change for change in found.changes}
        merged.update((change.seq, change) for change in unwritten)
        return Window([merged[seq] for seq in sorted(merged, reverse=True)[:limit]], found.low, found.at_start)

    def record(self, seq: int) -> Change | None:
        """Record ``seq`` from the file (or not written yet); None when it is not kept.

        :raises sqlite3.Error: the file could not be read."""
        for change in (*self._inflight, *self._pending):
            if change.seq == seq:
                return change
        if self._db is None or self._pool is None:
            return None
        return self._on_thread(self._reader.get, seq)

    # ------------------------------------------------------------------ stop
    def stop(self, timeout: float = 10.0) -> None:
        """Write everything pending and close the file; marked closed in order only when nothing is left
        unwritten (else the next start continues past a gap). Call after the watcher stopped."""
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
            self._close(database, clean=not (self._pending or self._rewrite))
        if self._pool is not None:
            with suppress(Exception):
                self._on_thread(self._reader.close)
        self._release_lock()
        self._stop_pool()

    def _close(self, database: Database, clean: bool) -> None:
        """Close; a failure here (the clean mark or the checkpoint on a full disk) loses nothing committed:
        an unwritten clean mark only makes the next start continue past a gap."""
        try:
            database.close(clean=clean)
        except Exception as exc:
            log.error("closing the state store failed", extra={"path": self.path, "error": describe_error(exc)})
        extra = {"path": self.path, "last_seq": self._cache.history.last_seq, "flushes": self.stats.flushes}
        if clean:
            log.info("state store closed", extra=extra)
        else:
            log.error("state store closed with changes unwritten; not marked clean, so the next start keeps "
                      "what was committed and continues the numbering past a gap",
                      extra={**extra, "pending_changes": len(self._pending), "rewrite": self._rewrite,
                             "error": self.health.last_error})
