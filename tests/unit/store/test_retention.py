"""The audit trail's bounds in the store file (``Database.trim``): by age and by bytes, the newest kept,
bounded batches per write, a rolled-back write recounted; reads of older pages (``ArchiveReader``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.cache.history import Action, Change
from app.config import ConfigError, load_settings
from app.resources import ResourceKind as K
from app.store import database as database_module
from app.store.archive import ArchiveReader, Flat
from app.store.database import FILE_NAME, Database

DAY = 86400.0
NOW = 1_800_000_000.0


def _changes(first: int, count: int, ts: float, size: int = 1_000) -> list[Change]:
    return [Change(seq, K.CONFIG, Action.UPDATE, f"c{seq % 3}", "cfg", ts, {"v": seq - 1}, {"v": seq}, size)
            for seq in range(first, first + count)]


def _seqs(path: Path) -> list[int]:
    with sqlite3.connect(path / FILE_NAME) as db:
        return [row[0] for row in db.execute("SELECT seq FROM history ORDER BY seq")]


def test_records_older_than_the_retention_leave_at_the_next_write(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME), retention=30 * DAY)
    database.write(_changes(1, 10, NOW - 40 * DAY), now=NOW - 40 * DAY)
    database.write(_changes(11, 10, NOW - 29 * DAY), now=NOW - 29 * DAY)
    assert _seqs(tmp_path) == list(range(1, 21))
    database.write(_changes(21, 1, NOW), now=NOW)
    assert _seqs(tmp_path) == list(range(11, 22)) and database.trimmed == 10
    database.close()


def test_past_the_byte_bound_the_oldest_leave_and_the_newest_stays(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME), max_history_bytes=10_000)
    database.write(_changes(1, 25, NOW), now=NOW)
    assert _seqs(tmp_path) == list(range(16, 26))          # 10 x 1,000 bytes
    database.write(_changes(26, 1, NOW, size=50_000), now=NOW)
    assert _seqs(tmp_path) == [26]                         # one record above the bound: still kept
    database.close()


def test_a_backlog_is_trimmed_in_bounded_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database_module, "TRIM_BATCH", 10)
    monkeypatch.setattr(database_module, "TRIM_BATCHES", 3)
    database = Database.open(str(tmp_path / FILE_NAME), retention=DAY)
    database.write(_changes(1, 100, NOW - 2 * DAY), now=NOW - 2 * DAY)
    database.write(_changes(101, 1, NOW), now=NOW)
    assert len(_seqs(tmp_path)) == 101 - 30                # 3 batches of 10 per write
    for _ in range(3):
        database.write(_changes(_seqs(tmp_path)[-1] + 1, 1, NOW), now=NOW)
    assert _seqs(tmp_path)[0] == 101
    database.close()


def test_a_rolled_back_write_leaves_the_file_and_its_byte_count_as_they_were(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME), max_history_bytes=5_000)
    database.write(_changes(1, 5, NOW), now=NOW)
    duplicate = [*_changes(6, 1, NOW), Change(7, K.CONFIG, Action.UPDATE, "x", "x", NOW, None, {"bad": {1, 2}})]
    with pytest.raises(TypeError):                         # not JSON: the transaction rolls back
        database.write(duplicate, now=NOW)
    database.write(_changes(6, 1, NOW), now=NOW)
    assert _seqs(tmp_path) == [2, 3, 4, 5, 6]
    database.close()


def test_the_reader_pages_newest_first_below_a_cursor_across_gaps(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME))
    database.write(_changes(1, 5, NOW) + _changes(1_000_001, 5, NOW), now=NOW)   # a gap (unclean stop)
    reader = ArchiveReader(str(tmp_path / FILE_NAME))
    first = reader.older(1_000_003, 4)
    assert [c.seq for c in first.changes] == [1_000_002, 1_000_001, 5, 4] and first.low == 4 and not first.at_start
    assert [c.seq for c in reader.older(3, 10).changes] == [2, 1] and reader.older(3, 10).at_start
    windowed = reader.older(1_000_006, 10, window=4)                  # four rows examined: 1,000,005 … 1,000,002
    assert [c.seq for c in windowed.changes] == [1_000_005, 1_000_004, 1_000_003, 1_000_002]
    assert windowed.low == 1_000_002 and not windowed.at_start
    other = Flat(object_id="c1", actions=("update",))                 # the flat filters in SQL
    assert [c.seq for c in reader.older(1_000_006, 10, other).changes] == [1_000_003, 4, 1]
    assert reader.older(1_000_006, 10, Flat(kind="service")).changes == []
    old = reader.get(4)
    assert old is not None and old.after == {"v": 4} and old.before == {"v": 3} and old.size == 1_000
    assert reader.get(6) is None
    with pytest.raises(sqlite3.OperationalError):          # read-only: it can never write
        reader._connection().execute("DELETE FROM history")
    reader.close()
    database.close()


def test_load_restores_only_what_the_ring_keeps(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME))
    related = [Change(seq, K.SERVICE, Action.REF_CHANGED, "s", "s", NOW, None, None, 300) for seq in range(51, 71)]
    database.write(_changes(1, 50, NOW) + related + _changes(71, 30, NOW), now=NOW)
    loaded = database.load(keep=20, keep_bytes=1_000_000)
    seqs = [change.seq for change in loaded.records]
    assert seqs == list(range(66, 71)) + list(range(81, 101))   # 20 changes of objects, 20 // 4 related
    small = database.load(keep=20, keep_bytes=3_500)
    assert [change.seq for change in small.records if change.action is Action.UPDATE] == [98, 99, 100]
    assert len(database.load().records) == 100
    database.close()


def test_a_filtered_read_widens_its_window_only_as_far_as_the_budget(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME))
    database.write(_changes(1, 300, NOW), now=NOW)                   # ids c0, c1, c2 in turn
    reader = ArchiveReader(str(tmp_path / FILE_NAME))
    rare = Flat(object_id="c1")
    wide = reader.older(301, 150, rare, window=1_000)               # more than the small window holds
    assert [c.seq for c in wide.changes] == [seq for seq in range(300, 0, -1) if seq % 3 == 1][:150]
    assert wide.at_start and wide.low == 0
    cut = reader.older(301, 150, rare, window=90)                   # the budget: 90 rows examined
    assert [c.seq for c in cut.changes] == [seq for seq in range(300, 210, -1) if seq % 3 == 1]
    assert cut.low == 211 and not cut.at_start
    reader.close()
    database.close()


def test_the_bounds_are_configurable_and_bad_values_name_the_key(tmp_path: Path) -> None:
    defaults = load_settings({}, search_paths=())
    assert defaults.history_retention == 30 * DAY and defaults.history_archive_max_bytes == 1024**3
    chosen = load_settings({"SERVICE_HISTORY_RETENTION": "2160h", "SERVICE_HISTORY_ARCHIVE_MAX_BYTES": "512MiB"},
                           search_paths=())
    assert chosen.history_retention == 90 * DAY and chosen.history_archive_max_bytes == 512 * 1024**2
    toml = tmp_path / "shoal.toml"
    toml.write_text('[storage]\nhistory_retention = "1h"\nhistory_max_bytes = "2GB"\n')
    from_file = load_settings({}, config_path=str(toml))
    assert from_file.history_retention == 3600 and from_file.history_archive_max_bytes == 2_000_000_000
    for environ, key in (({"SERVICE_HISTORY_RETENTION": "30d"}, "storage.history_retention"),
                         ({"SERVICE_HISTORY_RETENTION": "-1h"}, "storage.history_retention"),
                         ({"SERVICE_HISTORY_ARCHIVE_MAX_BYTES": "1KB"}, "storage.history_max_bytes")):
        with pytest.raises(ConfigError, match=key):
            load_settings(environ, search_paths=())
