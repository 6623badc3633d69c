"""The session table: idle sessions end (by the reaper greenlet too), an open GET stream keeps its session,
the cap makes room by ending idle ones first, and idle sessions stay small (256 of them measured)."""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

from app.auth.identity import Identity
from app.mcp import registry
from app.mcp.sessions import new_session_id, table_of
from tests.unit.mcp.test_transport_support import SESSION, VERSION, initialize, make_harness, open_session, rpc
from tests.unit.support import wait_until

ALICE = Identity("alice", "alice", "oauth")


def test_session_ids_are_128_random_bits_of_visible_ascii() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(value) == 22 and all(0x21 <= ord(c) <= 0x7E for c in value) for value in ids)


def test_idle_sessions_end_and_leave_the_subscribers(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_session_idle_ttl=60.0):
        table = table_of(harness.app)
        idle = table.create(ALICE, "2025-11-25", {}, "a")
        busy = table.create(ALICE, "2025-11-25", {}, "b")
        streaming = table.create(ALICE, "2025-11-25", {}, "c")
        assert idle and busy and streaming
        streaming.open_stream(None)
        now = time.monotonic()
        busy.last_used = now + 30
        assert table.reap(now + 61) == 1
        assert idle.ended and idle.id not in table.sessions and idle not in registry.subscribers(harness.app)
        assert busy.id in table.sessions and streaming.id in table.sessions   # an open GET stream is use
        assert table.find(idle.id, ALICE) is None


def test_the_reaper_greenlet_ends_idle_sessions_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_session_idle_ttl=0.3):
        client = harness.app.test_client()
        headers = open_session(client)
        assert rpc(client, "ping", headers=headers).status_code == 200
        table = table_of(harness.app)
        wait_until(lambda t=table: not t.sessions, 5, message="the idle session reaped")  # type: ignore[misc]
        assert rpc(client, "ping", headers=headers).status_code == 404


def test_the_cap_ends_idle_sessions_before_refusing(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_max_sessions=2, mcp_session_idle_ttl=60.0):
        table = table_of(harness.app)
        first = table.create(ALICE, "2025-11-25", {}, None)
        second = table.create(ALICE, "2025-11-25", {}, None)
        assert first and second and table.create(ALICE, "2025-11-25", {}, None) is None
        first.last_used -= 120   # idle past the TTL: its place is taken
        third = table.create(ALICE, "2025-11-25", {}, None)
        assert third is not None and first.ended and set(table.sessions) == {second.id, third.id}


def test_another_subject_cannot_use_or_end_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch):
        table = table_of(harness.app)
        session = table.create(ALICE, "2025-11-25", {}, None)
        assert session is not None
        assert table.find(session.id, Identity("bob", "bob", "oauth")) is None
        assert table.find(session.id, ALICE) is session


def test_256_idle_sessions_take_under_20_kb_each(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_max_sessions=300):
        client = harness.app.test_client()
        warm = open_session(client)   # first-use allocations (caches, the table) are not per session
        assert rpc(client, "ping", headers=warm).status_code == 200
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for index in range(256):
                headers = open_session(client, **{"X-Agent": f"agent-{index}"})
                assert rpc(client, "ping", headers={**headers, "X-Agent": f"agent-{index}"}).status_code == 200
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        assert len(table_of(harness.app).sessions) == 257
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        per_session = grown / 256
        print(f"{per_session:.0f} bytes per idle session")
        assert per_session <= 20 * 1024, f"{per_session:.0f} bytes per idle session"


def test_initialize_names_no_session_and_a_request_with_one_is_not_initialize(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch):
        client = harness.app.test_client()
        answer = initialize(client)
        again = initialize(client, **{SESSION: answer.headers[SESSION], VERSION: "2025-11-25"})
        assert again.status_code == 200 and again.headers[SESSION] != answer.headers[SESSION]
        assert len(table_of(harness.app).sessions) == 2
