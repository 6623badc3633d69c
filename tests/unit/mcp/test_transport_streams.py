"""The event streams of ``/mcp``, read in-process: a handshake session's GET stream (priming, framing, event
ids, a second GET refused, replay after ``Last-Event-ID``, the sync when the ring no longer holds it, keepalive,
an overflowing client, the end at worker drain) and the 2026 ``subscriptions/listen`` stream (acknowledgement,
stamped notifications, the final result at a graceful end)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from app.mcp import registry, sessions, wire
from app.mcp.sessions import Listener, Session, table_of
from tests.unit.mcp.test_transport_support import (
    MODERN,
    VERSION,
    Chunks,
    error_of,
    make_harness,
    mcp,
    modern_meta,
    open_session,
    rpc,
)
from tests.unit.support import Harness, wait_until

__all__ = ["mcp"]
UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"


def _session(harness: Harness) -> Session:
    found = [s for s in registry.subscribers(harness.app) if isinstance(s, Session)]
    assert len(found) == 1
    return found[0]


def _events(chunk: bytes) -> list[tuple[str | None, Any]]:
    """(id, decoded data) of every event with data in ``chunk``."""
    found: list[tuple[str | None, Any]] = []
    for block in chunk.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        if fields.get("data"):
            found.append((fields.get("id"), json.loads(fields["data"])))
    return found


def _get(harness: Harness, headers: dict[str, str], **extra: str) -> Chunks:
    return Chunks(harness.app.test_client().get("/mcp", headers={**headers, **extra}, buffered=False))


def test_the_get_stream_primes_then_carries_numbered_notifications(mcp: Harness) -> None:
    headers = open_session(mcp.app.test_client())
    stream = _get(mcp, headers)
    assert stream.answer.headers["X-Accel-Buffering"] == "no"
    assert stream.next() == b"id: 0\nretry: 3000\ndata: \n\n"
    session = _session(mcp)
    session.subscriptions.add("service://cluster")
    assert session.notify(UPDATED, {"uri": "service://cluster"}) is True
    assert session.notify(LIST_CHANGED, {}) is True
    chunk = stream.next()
    assert _events(chunk) == [
        ("1", {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": "service://cluster"}}),
        ("2", {"jsonrpc": "2.0", "method": LIST_CHANGED, "params": {}})]
    assert session.wants("service://cluster") and not session.wants("service://history") and session.list_changed
    stream.close()
    assert session.stream is None


def test_older_revisions_get_no_priming_event(mcp: Harness) -> None:
    headers = open_session(mcp.app.test_client(), "2025-03-26")
    stream = _get(mcp, headers)
    assert stream.next() == b"retry: 3000\n\n"
    stream.close()


def test_a_second_concurrent_get_is_409_and_the_get_may_precede_initialized(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    stream = _get(mcp, headers)   # notifications/initialized not sent yet
    stream.next()
    second = client.get("/mcp", headers=headers)
    assert second.status_code == 409 and error_of(second)["code"] == -32600
    assert rpc(client, "notifications/initialized", headers=headers, request_id=None).status_code == 202
    stream.close()
    again = _get(mcp, headers)
    assert again.next().startswith(b"id: 0\n")
    again.close()


def test_a_stream_closed_before_its_first_byte_frees_its_place(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    unread = client.get("/mcp", headers=headers, buffered=False)
    assert unread.status_code == 200
    unread.close()   # the server gave up before iterating the body (its finally never ran)
    assert _session(mcp).stream is None
    again = _get(mcp, headers)
    assert again.next().startswith(b"id: 0\n")
    again.close()
    listen = _listen(mcp, {"resourcesListChanged": True})
    listen.close()
    assert not any(isinstance(s, Listener) for s in registry.subscribers(mcp.app))


def test_the_get_stream_needs_a_known_session(mcp: Harness) -> None:
    client = mcp.app.test_client()
    headers = open_session(client)
    head = client.head("/mcp", headers=headers)
    assert head.status_code == 200 and head.mimetype == "text/event-stream" and _session(mcp).stream is None
    assert client.get("/mcp", headers={VERSION: "2025-11-25"}).status_code == 400
    assert client.get("/mcp", headers={"Mcp-Session-Id": "nope"}).status_code == 404


def test_last_event_id_replays_what_was_missed(mcp: Harness) -> None:
    headers = open_session(mcp.app.test_client())
    session = _session(mcp)
    stream = _get(mcp, headers)
    stream.next()
    for index in range(3):
        session.notify(UPDATED, {"uri": f"service://nodes/n{index}"})
    assert [event_id for event_id, _ in _events(stream.next())] == ["1", "2", "3"]
    stream.close()
    session.notify(UPDATED, {"uri": "service://nodes/n3"})   # while no stream is open: kept in the ring
    resumed = _get(mcp, headers, **{"Last-Event-ID": "2"})
    first = resumed.next()
    assert first.startswith(b"id: 2\nretry: 3000\ndata: \n\n")   # resumption point before the replay
    assert [(i, e["params"]["uri"]) for i, e in _events(first)] == [("3", "service://nodes/n2"),
                                                                   ("4", "service://nodes/n3")]
    resumed.close()
    current = _get(mcp, headers, **{"Last-Event-ID": "4"})
    assert current.next() == b"id: 4\nretry: 3000\ndata: \n\n"   # nothing missed
    current.close()


@pytest.mark.parametrize("last", ["1", "99", "-3", "garbage"])
def test_an_id_the_ring_no_longer_holds_gets_the_sync(mcp: Harness, monkeypatch: pytest.MonkeyPatch,
                                                      last: str) -> None:
    monkeypatch.setattr(sessions, "RING_BYTES", 300)
    headers = open_session(mcp.app.test_client())
    session = _session(mcp)
    session.subscriptions.update({"service://services/b", "service://services/a"})
    stream = _get(mcp, headers)
    stream.next()
    stream.close()
    for _ in range(10):
        session.notify(UPDATED, {"uri": "service://services/a"})
    resumed = _get(mcp, headers, **{"Last-Event-ID": last})
    events = _events(resumed.next())
    assert [(e["method"], e["params"]) for _, e in events] == [
        (LIST_CHANGED, {}), (UPDATED, {"uri": "service://services/a"}), (UPDATED, {"uri": "service://services/b"})]
    assert [event_id for event_id, _ in events] == ["11", "12", "13"]
    resumed.close()


def test_idle_streams_get_keepalive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, sse_keepalive=0.05):
        headers = open_session(harness.app.test_client())
        stream = _get(harness, headers)
        stream.next()
        assert stream.next() == wire.KEEPALIVE
        stream.close()


def test_a_client_that_stops_reading_loses_its_stream_not_the_worker(mcp: Harness,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "QUEUE_BYTES", 400)
    headers = open_session(mcp.app.test_client())
    session = _session(mcp)
    stream = _get(mcp, headers)
    stream.next()
    delivered = [session.notify(UPDATED, {"uri": f"service://nodes/{index}"}) for index in range(10)]
    assert delivered[0] is True and delivered[-1] is False   # never waited: dropped once full
    rest = stream.rest()
    assert rest.endswith(wire.CLOSING)   # the client reconnects and is replayed from the ring
    assert session.stream is None


def test_drain_ends_open_streams_with_a_retry_hint(mcp: Harness) -> None:
    headers = open_session(mcp.app.test_client())
    stream = _get(mcp, headers)
    stream.next()
    mcp.runtime.draining.set()
    with gevent.Timeout(3):
        assert stream.rest() == wire.CLOSING


# -------------------------------------------------------------------------------- subscriptions/listen
def _listen(harness: Harness, notifications: dict[str, Any], request_id: str = "listen-1") -> Chunks:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
            "params": {"notifications": notifications, "_meta": modern_meta()}}
    headers = {VERSION: MODERN, "Mcp-Method": "subscriptions/listen", "Accept": "application/json, text/event-stream"}
    return Chunks(harness.app.test_client().post("/mcp", json=body, headers=headers, buffered=False))


@pytest.fixture
def listener_of(mcp: Harness) -> Iterator[Any]:
    def find() -> Listener:
        found = [s for s in registry.subscribers(mcp.app) if isinstance(s, Listener)]
        assert len(found) == 1
        return found[0]

    yield find


def test_listen_acknowledges_the_honored_filter_then_stamps_every_notification(mcp: Harness,
                                                                             listener_of: Any) -> None:
    stream = _listen(mcp, {"resourcesListChanged": True, "toolsListChanged": True, "promptsListChanged": True,
                           "resourceSubscriptions": ["service://cluster", "service://cluster"]})
    first = stream.next()
    assert first.startswith(b"id: 0\nretry: 3000\ndata: \n\n")
    [(_, ack)] = _events(first)
    stamp = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"resourcesListChanged": True,
                                                "resourceSubscriptions": ["service://cluster"]}, "_meta": stamp}}
    listener = listener_of()
    assert listener.wants("service://cluster") and not listener.wants("service://history")
    assert listener.notify(UPDATED, {"uri": "service://cluster"}) is True
    assert listener.notify(UPDATED, {"uri": "service://history"}) is False
    assert listener.notify(LIST_CHANGED, {}) is True
    events = [event for _, event in _events(stream.next())]
    assert events == [{"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": "service://cluster", "_meta": stamp}},
                      {"jsonrpc": "2.0", "method": LIST_CHANGED, "params": {"_meta": stamp}}]
    table_of(mcp.app).end_streams()   # a graceful end (what the worker's drain does)
    rest = stream.rest()
    assert rest.endswith(wire.CLOSING)
    [(_, final)] = _events(rest)
    assert final["id"] == "listen-1" and final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
    assert not any(isinstance(s, Listener) for s in registry.subscribers(mcp.app))


def test_a_listener_without_list_changes_gets_none(mcp: Harness, listener_of: Any) -> None:
    stream = _listen(mcp, {"resourceSubscriptions": ["service://history"]})
    [(_, ack)] = _events(stream.next())
    assert ack["params"]["notifications"] == {"resourceSubscriptions": ["service://history"]}
    listener = listener_of()
    assert listener.list_changed is False and listener.notify(LIST_CHANGED, {}) is False
    stream.close()
    assert not registry.subscribers(mcp.app)


def test_listen_with_a_malformed_filter_is_invalid_params(mcp: Harness) -> None:
    body = {"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": "service://cluster"}, "_meta": modern_meta()}}
    answer = mcp.app.test_client().post("/mcp", json=body, headers={VERSION: MODERN,
                                                                     "Mcp-Method": "subscriptions/listen"})
    assert answer.status_code == 400 and error_of(answer)["code"] == -32602


def test_listen_streams_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    for harness in make_harness(monkeypatch, mcp_max_sessions=1):
        first = _listen(harness, {"resourcesListChanged": True})
        first.next()
        body = {"jsonrpc": "2.0", "id": "l2", "method": "subscriptions/listen",
                "params": {"notifications": {}, "_meta": modern_meta()}}
        refused = harness.app.test_client().post("/mcp", json=body, headers={
            VERSION: MODERN, "Mcp-Method": "subscriptions/listen"})
        assert refused.status_code == 503 and error_of(refused)["code"] == -32000
        assert error_of(refused)["data"]["retryAfterSeconds"] >= 1
        first.close()
        live = registry.subscribers(harness.app)
        wait_until(lambda live=live: not live, 2)  # type: ignore[misc]
