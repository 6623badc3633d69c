"""Telling a write that never reached the engine (503, nothing applied) from one whose outcome is unknown
(504: sent, then no answer), over real sockets; and the audit that waits for an unknown outcome's change."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest
import requests
import urllib3.exceptions

from app.cache.history import Action, Change
from app.engine.writes import EngineWriter, WriteFailure, classify
from app.resources import ResourceKind
from app.writes.audit import EXPECT_SECONDS, PRUNE_AT, AuditLog


def reason_of(call: object) -> str:
    with pytest.raises(WriteFailure) as caught:
        call()  # type: ignore[operator]
    return caught.value.reason


def test_a_write_to_an_engine_that_takes_it_but_never_answers_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(8)   # the kernel accepts; nobody ever answers (a stopped dockerd)
        writer = EngineWriter(f"unix://{path}", timeout=0.3)
        assert reason_of(lambda: writer.update_node("n1", 3, {})) == "unknown"
        assert reason_of(lambda: writer.remove("config", "c1")) == "unknown"
        assert reason_of(lambda: writer.inspect("node", "n1")) == "unavailable"   # a read applies nothing
        writer.close()


def test_a_write_to_a_missing_socket_or_a_closed_port_never_reached_the_engine(tmp_path: Path) -> None:
    writer = EngineWriter(f"unix://{tmp_path / 'absent.sock'}", timeout=1)
    assert reason_of(lambda: writer.update_node("n1", 3, {})) == "unavailable"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    writer = EngineWriter(f"tcp://127.0.0.1:{port}", timeout=1)
    assert reason_of(lambda: writer.update_node("n1", 3, {})) == "unavailable"


@pytest.mark.parametrize(("exc", "reason"), [
    (requests.exceptions.ReadTimeout("read timed out"), "unknown"),
    (requests.exceptions.ConnectTimeout("connect timed out"), "unavailable"),
    (requests.exceptions.ConnectionError(urllib3.exceptions.ProtocolError(
        "Connection aborted.", http.client.RemoteDisconnected("closed"))), "unknown"),
    (requests.exceptions.ConnectionError(urllib3.exceptions.ProtocolError(
        "Connection aborted.", ConnectionResetError(104, "reset"))), "unknown"),
    (requests.exceptions.ConnectionError(urllib3.exceptions.ProtocolError(
        "Connection aborted.", FileNotFoundError(2, "No such file"))), "unavailable"),
    (requests.exceptions.ConnectionError(urllib3.exceptions.MaxRetryError(
        None, "/x", urllib3.exceptions.NewConnectionError(None, "refused"))), "unavailable"),  # type: ignore[arg-type]
])
def test_transport_failures_of_writes(exc: Exception, reason: str) -> None:
    assert classify(exc, is_write=True).reason == reason
    assert classify(exc).reason == "unavailable"   # reads: nothing to be unsure about


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeCache:
    def __init__(self) -> None:
        self.listener: object = None

    def subscribe(self, listener: object) -> object:
        self.listener = listener
        return lambda: None


def change(seq: int, object_id: str) -> Change:
    return Change(seq=seq, kind=ResourceKind.SERVICE, action=Action.UPDATE, id=object_id, name=object_id,
                  timestamp=0.0)


def test_an_unknown_outcome_keeps_its_audit_pending_for_its_lifetime() -> None:
    cache, clock = FakeCache(), Clock()
    audit = AuditLog(cache, clock=clock)  # type: ignore[arg-type]
    stamp = {"identity": "alice", "requestId": "r1"}
    audit.expect(ResourceKind.SERVICE, "s1", stamp, lifetime=600)
    clock.now += EXPECT_SECONDS * 5   # long past an ordinary expectation
    assert audit.pending(ResourceKind.SERVICE, "s1") == stamp
    cache.listener([change(7, "s1")])  # type: ignore[operator]
    assert audit.of(7) == stamp and audit.pending(ResourceKind.SERVICE, "s1") is None


def test_lapsed_expectations_are_pruned() -> None:
    cache, clock = FakeCache(), Clock()
    audit = AuditLog(cache, clock=clock)  # type: ignore[arg-type]
    for i in range(PRUNE_AT):
        audit.expect(ResourceKind.SERVICE, f"s{i}", {"requestId": str(i)})
    clock.now += EXPECT_SECONDS + 1
    audit.expect(ResourceKind.SERVICE, "fresh", {"requestId": "fresh"})
    assert len(audit._expected) == 1


def test_swarm_and_plugin_writes_of_unknown_outcome_are_eng005_too() -> None:
    from app.engine import plugins, swarm

    failure = WriteFailure("unknown", "no answer from the engine after the request was sent")
    for problem in (swarm.problem(failure, "SWM003", what="the swarm update"),
                    plugins.problem(failure, "PLG003", what="the plugin install")):
        assert (problem.code, problem.status, problem.extra["outcome"]) == ("ENG005", 504, "unknown")
        assert "may have been applied" in problem.detail and "may apply it twice" in problem.detail
