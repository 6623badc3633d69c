"""A store that cannot write (SQLite's own "database or disk is full", made with ``PRAGMA max_page_count``):
the first error is the one reported, changes wait bounded in bytes, the failure is logged once and its end
once, readiness and metrics say so, and a stop with writes pending never marks the file clean."""

from __future__ import annotations

import copy
import logging
import sqlite3
from pathlib import Path

import gevent
import pytest

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.resources import ResourceKind
from app.store.database import FILE_NAME, Database
from app.store.health import StoreState, WriteHealth
from app.store.metrics import store_metrics
from app.store.persister import Persister
from tests.unit.objects import SVC_WEB, cluster
from tests.unit.support import wait_until

K = ResourceKind


def _started(path: Path, **options: float) -> tuple[Cache, Persister]:
    cache = Cache()
    store = Persister(cache, str(path / FILE_NAME), flush_interval=0.02, lock_timeout=0.3, **options)  # type: ignore[arg-type]
    assert store.start()
    return cache, store


def _fill(store: Persister) -> None:
    """The file may not grow by a single page: every write that adds data fails with SQLITE_FULL."""
    database = store._db
    assert database is not None
    pages = database._db.execute("PRAGMA page_count").fetchone()[0]
    database._db.execute(f"PRAGMA max_page_count = {pages}")


def _free(store: Persister) -> None:
    database = store._db
    assert database is not None
    database._db.execute("PRAGMA max_page_count = 1073741823")


def _bump_web(cache: Cache, label: str) -> None:
    raw = copy.deepcopy(cache.get(K.SERVICE, SVC_WEB).raw)  # type: ignore[union-attr]
    raw["Version"]["Index"] += 1
    raw["Spec"]["Labels"]["bump"] = label
    cache.apply_inspect(K.SERVICE, SVC_WEB, raw, cache.write_token())


def _file(path: Path) -> tuple[str, int, list[int]]:
    with sqlite3.connect(path / FILE_NAME) as db:
        clean = db.execute("SELECT value FROM meta WHERE key = 'clean'").fetchone()[0]
        last = int(db.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0])
        seqs = [row[0] for row in db.execute("SELECT seq FROM history ORDER BY seq")]
    db.close()
    return clean, last, seqs


def test_a_full_disk_reports_sqlites_own_error_not_the_failed_rollback(tmp_path: Path) -> None:
    database = Database.open(str(tmp_path / FILE_NAME))
    database._db.execute(f"PRAGMA max_page_count = {database._db.execute('PRAGMA page_count').fetchone()[0]}")
    big = [Change(seq, K.CONFIG, Action.CREATE, f"c{seq}", f"c{seq}", 1.0, None, {"x": "y" * 2000})
           for seq in range(1, 50)]
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        database.write(big)
    assert not database._db.in_transaction
    database._db.execute("PRAGMA max_page_count = 1073741823")
    database.write(big)            # no transaction left open by the failure: the next one works
    assert database.load().last_seq == 49
    database.close()


def test_writes_fail_while_the_disk_is_full_then_recover_with_the_history_complete(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    wait_until(lambda: store.stats.flushes >= 1)
    _fill(store)
    with caplog.at_level(logging.INFO, logger="app.store"):
        for number in range(20):
            _bump_web(cache, "x" * 3000 + str(number))
            gevent.sleep(0.03)   # pacing, not a wait: the changes keep coming while the writes fail
        wait_until(lambda: store.stats.write_errors >= 3)
        status = store.status()
        assert status.state is StoreState.FAILING and status.pending_changes > 0 and status.pending_bytes > 0
        assert "database or disk is full" in (status.last_error or "")
        document = status.document()
        assert document["state"] == "failing" and document["failingSince"] is not None
        metrics = {metric.name: metric for metric in store_metrics(status)}
        assert [s.value for s in metrics["shoal_store_state"].samples if s.labels["state"] == "failing"] == [1.0]
        assert metrics["shoal_store_pending_bytes"].samples[0].value == status.pending_bytes
        _free(store)
        wait_until(lambda: not store.health.failing)
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("state store writes fail; changes are kept in memory and retried") == 1
    assert messages.count("state store writes recovered") == 1
    assert store.status().state is StoreState.OK and store.status().pending_changes == 0
    store.stop()
    clean, last, seqs = _file(tmp_path)
    ring = [c.seq for c in cache.history.newest_first()][::-1]
    assert (clean, last, seqs) == ("1", cache.history.last_seq, ring)


def test_pending_changes_are_bounded_in_bytes_then_the_file_is_rewritten_from_the_cache(tmp_path: Path) -> None:
    cache, store = _started(tmp_path, max_pending_bytes=40_000)
    cache.replace_all(cluster())
    wait_until(lambda: store.stats.flushes >= 1)
    _fill(store)
    for number in range(60):
        _bump_web(cache, "x" * 3000 + str(number))
        assert store.status().pending_bytes <= 40_000
        gevent.sleep(0.005)   # pacing, not a wait: the writer retries between the changes
    assert store.stats.dropped_changes > 0 and store.stats.write_errors >= 1
    _free(store)
    wait_until(lambda: store.stats.rewrites >= 1 and not store.health.failing)
    store.stop()
    clean, last, seqs = _file(tmp_path)
    assert (clean, last, seqs) == ("1", cache.history.last_seq, [c.seq for c in cache.history.newest_first()][::-1])
    restored = Cache()
    again = Persister(restored, str(tmp_path / FILE_NAME))
    assert again.start()
    assert restored.get(K.SERVICE, SVC_WEB).raw == cache.get(K.SERVICE, SVC_WEB).raw  # type: ignore[union-attr]
    again.stop()


def test_a_stop_whose_last_write_fails_does_not_mark_the_file_clean(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    cache, store = _started(tmp_path)
    store.flush_interval = 60.0
    cache.replace_all(cluster())
    gevent.sleep(0.1)   # not a wait: the writer is inside its 60 s window, nothing may be written yet
    _fill(store)
    with caplog.at_level(logging.ERROR, logger="app.store"):
        store.stop()
    assert any("not marked clean" in r.getMessage() and "database or disk is full" in str(r.__dict__.get("error"))
               for r in caplog.records)
    clean, last, seqs = _file(tmp_path)
    assert clean == "0" and seqs == [] and last < cache.history.oldest_seq  # type: ignore[operator]
    # The next start treats it as a crash: every number the stopped process used lies inside the gap.
    restored = Cache()
    again = Persister(restored, str(tmp_path / FILE_NAME))
    assert again.start()
    assert restored.history.last_seq > cache.history.last_seq
    assert all(restored.history.since(c.seq) is None for c in cache.history.newest_first())
    again.stop()


def test_failures_are_retried_with_a_growing_delay_and_reminded_at_most_every_interval(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    health = WriteHealth("/x/shoal.db")
    assert health.retry_delay(0.5) == 0.5
    with caplog.at_level(logging.INFO, logger="app.store"):
        for _ in range(10):
            health.failed(sqlite3.OperationalError("database or disk is full"), 3, 100, False)
        assert [health.retry_delay(0.5)] == [30.0]
        monkeypatch.setattr("app.store.health.REMINDER_INTERVAL", 0.0)
        health.failed(sqlite3.OperationalError("database or disk is full"), 3, 100, False)
        health.succeeded()
        health.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["state store writes fail; changes are kept in memory and retried",
                        "state store writes still fail", "state store writes recovered"]
    assert health.retry_delay(0.5) == 0.5


@pytest.mark.parametrize("with_store", [True, False])
def test_readiness_and_metrics_carry_the_store_state(tmp_path: Path, with_store: bool) -> None:
    from tests.fakes import FakeEngine
    from tests.unit.support import build_harness

    harness = build_harness(FakeEngine(cluster()), **({"data_dir": str(tmp_path)} if with_store else {}))
    harness.start()
    try:
        client = harness.app.test_client()
        ready = client.get("/-/ready")
        assert ready.status_code == 200
        assert ready.get_json()["store"]["state"] == ("ok" if with_store else "off")
        metrics = client.get("/-/metrics").get_data(as_text=True)
        assert f'shoal_store_state{{state="{"ok" if with_store else "off"}"}} 1.0' in metrics
        assert "\nshoal_store_pending_bytes " in metrics and "\nshoal_store_write_errors_total 0.0" in metrics
        if with_store:
            assert harness.runtime.store is not None
            _fill(harness.runtime.store)
            harness.cache.upsert(K.CONFIG, {**cluster()[K.CONFIG][0], "Version": {"Index": 999},
                                            "Spec": {"Name": "big", "Data": "x" * 50_000}})
            wait_until(lambda: client.get("/-/ready").get_json()["store"]["state"] == "failing")
            document = client.get("/-/ready").get_json()
            assert client.get("/-/ready").status_code == 200 and document["store"]["pendingBytes"] > 0
            assert 'shoal_store_state{state="failing"} 1.0' in client.get("/-/metrics").get_data(as_text=True)
            _free(harness.runtime.store)
            wait_until(lambda: client.get("/-/ready").get_json()["store"]["state"] == "ok")
    finally:
        harness.stop()


def test_a_gap_that_cannot_be_recorded_at_start_is_still_covered_by_the_clock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cache, store = _started(tmp_path)
    cache.replace_all(cluster())
    wait_until(lambda: store.stats.flushes >= 1)
    store._db = None            # killed: never closed in order
    store._release_lock()
    store._stopping.set()

    def full(self: Database, last_seq: int) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Database, "continue_after", full)
    second = Cache()
    with caplog.at_level(logging.WARNING, logger="app.store"):
        again = Persister(second, str(tmp_path / FILE_NAME), lock_timeout=0.3)
        assert again.start()
    warned = [r for r in caplog.records if "not closed in order" in r.getMessage()]
    assert warned and "database or disk is full" in str(warned[0].__dict__["gap_not_recorded"])
    assert second.history.last_seq > cache.history.last_seq   # the gap holds in memory
    sent = second.history.last_seq
    again._db = None            # killed again before anything was written
    again._release_lock()
    again._stopping.set()
    monkeypatch.undo()
    third = Cache()
    last = Persister(third, str(tmp_path / FILE_NAME), lock_timeout=0.3)
    assert last.start()
    assert third.history.last_seq > sent                      # the clock moved on: past what the second sent
    last.stop()
