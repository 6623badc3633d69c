"""The SQLite store: round trip into a fresh cache, batched writes, trimming to the ring, a final flush at
stop, bad files moved aside (never deleted), the lock, and ``:memory:`` as "off"."""

from __future__ import annotations

import copy
import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from app.cache.history import Action, Change, sequence_base
from app.cache.store import Cache
from app.history.archive import ring_floor
from app.resources import ResourceKind
from app.store.database import APPLICATION_ID, FILE_NAME, Database
from app.store.lock import DataDirInUse
from app.store.persister import SEQ_MARGIN, Persister, resume_after_gap
from tests.unit.objects import CFG_OTHER, SVC_WEB, Raw, cluster
from tests.unit.support import wait_until

K = ResourceKind


def _state(cache: Cache) -> dict[ResourceKind, dict[str, Raw]]:
    return {kind: {entry.id: entry.raw for entry in cache.entries(kind)} for kind in ResourceKind}


def _ring(cache: Cache) -> list[Change]:
    return list(cache.history.newest_first())[::-1]


def _started(path: Path, cache: Cache | None = None, interval: float = 0.05) -> tuple[Cache, Persister]:
    cache = cache if cache is not None else Cache()
    store = Persister(cache, str(path / FILE_NAME), flush_interval=interval, lock_timeout=0.3)
    store.start()
    return cache, store


def _flushed(store: Persister, count: int = 1) -> None:
    """Wait for the store's writer to have committed ``count`` batches."""
    wait_until(lambda: store.stats.flushes >= count, message=f"{count} flushes")


def _bump_web(cache: Cache, label: str) -> None:
    raw = copy.deepcopy(cache.get(K.SERVICE, SVC_WEB).raw)  # type: ignore[union-attr]
    raw["Version"]["Index"] += 1
    raw["Spec"]["Labels"]["bump"] = label
    cache.apply_inspect(K.SERVICE, SVC_WEB, raw, cache.write_token())


def test_round_trip_restores_objects_history_sequence_and_epoch(tmp_path: Path) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    _bump_web(cache, "one")
    cache.remove(K.CONFIG, CFG_OTHER)
    epoch = store.epoch
    store.stop()

    restored, again = _started(tmp_path)
    assert again.epoch == epoch is not None
    assert _state(restored) == _state(cache)
    assert _ring(restored) == _ring(cache)
    assert restored.history.last_seq == cache.history.last_seq
    assert again.stats.restored_objects == sum(cache.count(k) for k in ResourceKind if k is not K.STACK)
    assert not restored.freshness.synced
    assert again.stats.restored_records == len(cache.history)
    # The next change continues the sequence.
    _bump_web(restored, "two")
    assert (_ring(restored)[-2].id, _ring(restored)[-2].seq) == (SVC_WEB, cache.history.last_seq + 1)
    again.stop()


def test_the_file_and_its_directory_are_private(tmp_path: Path) -> None:
    cache, store = _started(tmp_path / "state")
    cache.replace_all(cluster())
    _flushed(store)
    directory = tmp_path / "state"
    assert directory.stat().st_mode & 0o777 == 0o700
    for name in (FILE_NAME, FILE_NAME + "-wal", FILE_NAME + "-shm"):
        assert (directory / name).stat().st_mode & 0o077 == 0, name
    store.stop()


def test_restored_records_share_decoded_objects_like_the_live_ring(tmp_path: Path) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    _bump_web(cache, "one")
    store.stop()
    restored, again = _started(tmp_path)
    last = next(c for c in restored.history.newest_first() if c.kind is K.SERVICE)
    assert last.id == SVC_WEB and last.action is Action.UPDATE
    assert last.after is restored.get(K.SERVICE, SVC_WEB).raw  # type: ignore[union-attr]
    again.stop()


def test_changes_are_written_in_batches_not_one_transaction_each(tmp_path: Path) -> None:
    cache, store = _started(tmp_path, interval=0.3)
    cache.replace_all(cluster())
    for number in range(50):
        _bump_web(cache, str(number))
    assert store.stats.flushes == 0            # nothing written inside the cache's writes
    _flushed(store)
    assert store.stats.flushes == 1
    assert store.stats.changes_written == len(cache.history)
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("SELECT count(*), max(seq) FROM history").fetchone() == (len(cache.history),
                                                                                    cache.history.last_seq)
        labels = db.execute("SELECT raw FROM objects WHERE id = ?", (SVC_WEB,)).fetchone()[0]
    assert '"bump":"49"' in labels                # the snapshot row is current, updated in place
    store.stop()


def test_the_file_keeps_history_beyond_the_ring_and_a_restart_loads_only_the_ring(tmp_path: Path) -> None:
    cache, store = _started(tmp_path, Cache(history_capacity=100))
    cache.replace_all(cluster())
    for number in range(250):
        _bump_web(cache, str(number))
    store.stop()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        seqs = [row[0] for row in db.execute("SELECT seq FROM history ORDER BY seq")]
    assert seqs[-1] == cache.history.last_seq and len(seqs) > 250 + 100   # the whole first sync and every bump
    assert seqs == sorted(set(seqs))
    restored = Cache(history_capacity=100)
    again = Persister(restored, str(tmp_path / FILE_NAME), flush_interval=0.05, lock_timeout=0.3, ring_size=100)
    again.start()
    assert len(restored.history) == len(cache.history) < len(seqs) and _ring(restored) == _ring(cache)   # the ring only
    assert [change.seq for change in again.older(restored.history.oldest_seq or 0, 1000).changes] == \
        [seq for seq in reversed(seqs) if seq < (restored.history.oldest_seq or 0)]
    oldest = again.record(seqs[0])
    assert oldest is not None and oldest.seq == seqs[0] and oldest.action is Action.CREATE
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        after = db.execute("SELECT after FROM history WHERE seq = ?", (seqs[0],)).fetchone()[0]
    assert oldest.after == json.loads(after)
    assert again.record(seqs[-1] + 10) is None
    again.stop()


def test_records_that_left_the_ring_before_their_write_are_still_found(tmp_path: Path) -> None:
    cache, store = _started(tmp_path, Cache(history_capacity=100), interval=60.0)   # nothing written yet
    cache.replace_all(cluster())
    for number in range(150):
        _bump_web(cache, str(number))
    floor = ring_floor(cache.history)          # the ring holds every record above it (lanes evicted below)
    assert floor >= (cache.history.oldest_seq or 0)
    window = store.older(floor + 1, 10_000)
    assert window.changes and window.at_start
    seqs = [change.seq for change in window.changes]
    assert seqs == list(range(floor, floor - len(seqs), -1))             # every one, newest first
    above = [change.seq for change in cache.history.newest_first() if change.seq > floor]
    assert len(seqs) + len(above) == cache.history.last_seq - seqs[-1] + 1   # ring + these = all made
    assert store.record(seqs[-1]) is window.changes[-1] and store.record(seqs[0]) is not None
    store.stop()


def test_stop_writes_what_is_pending(tmp_path: Path) -> None:
    cache, store = _started(tmp_path, interval=60.0)
    cache.replace_all(cluster())
    _bump_web(cache, "late")
    store.stop()
    assert store.stats.flushes == 1
    restored, again = _started(tmp_path)
    assert restored.get(K.SERVICE, SVC_WEB).raw["Spec"]["Labels"]["bump"] == "late"  # type: ignore[union-attr]
    again.stop()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'clean'").fetchone() == ("1",)


@pytest.mark.parametrize("content", [
    pytest.param(b"this is not a database at all\n" * 10, id="not-sqlite"),
    pytest.param(b"SQLite format 3\x00" + b"\xff" * 4000, id="damaged-header"),
])
def test_a_file_that_is_not_a_store_is_moved_aside_and_a_fresh_store_starts(
        tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    with caplog.at_level(logging.ERROR, logger="app.store.persister"):
        cache, store = _started(tmp_path)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(FILE_NAME + ".bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == content   # kept as it was, not deleted
    record = next(r for r in caplog.records if "moved aside" in r.getMessage())
    assert record.moved_to == str(aside[0]) and record.path == str(path)  # type: ignore[attr-defined]
    assert store.active and store.stats.moved_aside == 1
    cache.replace_all(cluster())
    store.stop()
    restored, again = _started(tmp_path)
    assert restored.history.last_seq == cache.history.last_seq
    again.stop()


def _foreign(path: Path, application_id: int = 0, version: int = 0) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('someone else''s data')")
        db.execute(f"PRAGMA application_id = {application_id}")
        db.execute(f"PRAGMA user_version = {version}")
    db.close()


@pytest.mark.parametrize(("application_id", "version", "reason"), [
    (0, 0, "another application"),
    (0x12345678, 1, "another application"),
    (APPLICATION_ID, 99, "schema version 99"),
])
def test_a_foreign_or_newer_database_is_moved_aside(tmp_path: Path, application_id: int, version: int, reason: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / FILE_NAME
    _foreign(path, application_id, version)
    with caplog.at_level(logging.ERROR, logger="app.store.persister"):
        _, store = _started(tmp_path)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(FILE_NAME + ".bad-") and "-wal" not in p.name
             and "-shm" not in p.name]
    assert len(aside) == 1
    with sqlite3.connect(aside[0]) as db:
        assert db.execute("SELECT body FROM notes").fetchone() == ("someone else's data",)
    db.close()
    assert any(reason in r.reason for r in caplog.records if hasattr(r, "reason"))
    store.stop()


def test_a_store_that_fails_its_integrity_check_is_moved_aside(tmp_path: Path) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    for number in range(300):
        _bump_web(cache, str(number) * 40)
    store.stop()
    path = tmp_path / FILE_NAME
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for offset in range(2 * page, len(data) - page, 3 * page):   # scribble over interior pages
        data[offset + 100: offset + 400] = os.urandom(300)
    path.write_bytes(bytes(data))
    restored, again = _started(tmp_path)
    assert again.stats.moved_aside == 1 and again.active
    # A fresh store: nothing restored from a damaged file, and a new sequence above every earlier number.
    assert len(restored.history) == 0 and restored.history.last_seq > cache.history.last_seq
    again.stop()


def test_unreadable_content_is_moved_aside(tmp_path: Path) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    store.stop()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE objects SET raw = '{not json' WHERE id = ?", (SVC_WEB,))
    db.close()
    restored, again = _started(tmp_path)
    assert again.stats.moved_aside == 1 and restored.count(K.SERVICE) == 0
    again.stop()


def test_a_second_opener_of_the_same_file_is_refused_not_given_the_file(tmp_path: Path) -> None:
    _, first = _started(tmp_path)
    with pytest.raises(DataDirInUse):   # our own pid and parent: waited for (lock_timeout), then refused
        _started(tmp_path)
    assert first.active
    first.stop()


def test_memory_database_works_for_the_file_layer() -> None:
    database = Database.open(":memory:")
    cache = Cache()
    cache.replace_all(cluster())
    database.write(_ring(cache))
    loaded = database.load()
    assert loaded.last_seq == cache.history.last_seq and loaded.records == _ring(cache)
    assert loaded.object_count == sum(cache.count(k) for k in ResourceKind if k is not K.STACK)
    database.close()


def test_a_failed_write_keeps_its_changes_for_the_next_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    cache, store = _started(tmp_path)
    real = Database.write
    calls = {"n": 0}

    def flaky(self: Database, changes: list[Change], now: float | None = None) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        real(self, changes, now=now)

    monkeypatch.setattr(Database, "write", flaky)
    with caplog.at_level(logging.ERROR, logger="app.store.persister"):
        cache.replace_all(cluster())
        wait_until(lambda: store.stats.write_errors >= 1, message="the failed write")
        _bump_web(cache, "after the failure")
        _flushed(store)
    assert store.stats.write_errors == 1 and calls["n"] >= 2
    assert any("writes fail" in r.getMessage() and "disk I/O error" in str(r.__dict__.get("error"))
               for r in caplog.records)
    store.stop()
    restored, again = _started(tmp_path)
    assert _state(restored) == _state(cache) and _ring(restored) == _ring(cache)
    again.stop()


def test_a_file_damaged_while_running_is_moved_aside_and_rewritten_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    _flushed(store)
    real = Database.write

    def damaged(self: Database, changes: list[Change], now: float | None = None) -> None:
        monkeypatch.setattr(Database, "write", real)
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(Database, "write", damaged)
    _bump_web(cache, "while damaged")
    wait_until(lambda: store.stats.rewrites >= 1, message="the rewrite after the damage")
    assert store.stats.moved_aside == 1 and store.stats.rewrites == 1 and store.active
    epoch = store.epoch
    store.stop()
    assert len([p for p in tmp_path.iterdir() if p.name.startswith(FILE_NAME + ".bad-")]) >= 1
    restored, again = _started(tmp_path)
    assert again.epoch == epoch                       # the sequence went on in memory: same epoch
    assert _state(restored) == _state(cache) and _ring(restored) == _ring(cache)
    again.stop()


def _crash(store: Persister) -> None:
    """What a kill leaves: the file never closed in order (the lock goes with the process)."""
    store._db = None
    store._release_lock()
    store._stopping.set()


def test_an_unclean_stop_keeps_every_committed_record_and_continues_past_a_gap(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    _flushed(store)
    assert store.stats.flushes == 1
    committed = cache.history.last_seq
    _crash(store)
    with caplog.at_level(logging.WARNING, logger="app.store.persister"):
        restored, again = _started(tmp_path)
    # The snapshot and every committed record come back under the same epoch (feed ids stay); the numbering
    # continues past a gap covering what the killed process may have sent without writing it.
    assert _state(restored) == _state(cache) and _ring(restored) == _ring(cache)
    assert again.epoch == store.epoch
    resumed = restored.history.last_seq
    assert committed < resumed <= sequence_base() and resumed > sequence_base() - 60_000_000   # the clock
    assert restored.history.since(committed) == []                    # up to date: nothing after it yet
    assert restored.history.since(committed + 1) is None              # inside the gap: sync
    assert restored.history.since(resumed - 1) is None
    assert any("not closed in order" in r.getMessage() for r in caplog.records)
    flushes = again.stats.flushes
    _bump_web(restored, "after the crash")
    _flushed(again, flushes + 1)
    after_gap = [c.seq for c in restored.history.since(committed) or []]
    assert after_gap and after_gap[0] == resumed + 1
    # Recorded at once: a second crash before any flush does not reuse the numbers either.
    _crash(again)
    third_cache, third = _started(tmp_path)
    assert third_cache.history.last_seq > resumed + 1
    assert [c.seq for c in _ring(third_cache)] == [c.seq for c in _ring(restored)]
    third.stop()


def test_the_runtime_restores_before_its_watcher_syncs_and_flushes_at_stop(tmp_path: Path) -> None:
    from tests.fakes import FakeEngine
    from tests.unit.support import build_harness

    engine = FakeEngine(cluster())
    first = build_harness(engine, data_dir=str(tmp_path))
    first.start()
    last = first.cache.history.last_seq
    epoch = first.runtime.history_epoch
    first.stop()
    del engine.objects[K.CONFIG][CFG_OTHER]              # removed while the service was down
    second = build_harness(engine, data_dir=str(tmp_path))
    second.start()
    changes = list(second.cache.history.newest_first())[::-1]
    news = [(c.kind, c.action, c.id) for c in changes if c.seq > last]
    assert news[0] == (K.CONFIG, Action.REMOVE, CFG_OTHER)
    assert all(c.action is not Action.CREATE for c in changes if c.seq > last)   # nothing re-created
    assert second.runtime.history_epoch == epoch
    second.stop()
    memory = build_harness(engine)
    assert memory.runtime.store is None and memory.runtime.history_epoch == int(memory.runtime.started_at)
    memory.start()   # without persistence a new sequence starts above every earlier number
    assert memory.cache.history.oldest_seq is not None and memory.cache.history.oldest_seq > last
    memory.stop()


def test_the_gap_follows_the_clock_and_only_a_clock_behind_the_numbers_gets_the_margin() -> None:
    now = 1_800_000_000.0
    assert resume_after_gap(sequence_base(now) - 5_000, now) == sequence_base(now)    # sane: the clock
    assert resume_after_gap(7_170, now) == sequence_base(now)                          # an old small sequence
    behind = sequence_base(now) + 42
    assert resume_after_gap(behind, now) == behind + SEQ_MARGIN                        # the clock went back
