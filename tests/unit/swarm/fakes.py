"""A scripted engine transport for the swarm and plugin engines: answers by (method, path), records every
request. Unit speed only; the integration tests use the real engine (which has no registry for installs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.swarm import EngineCalls
from app.engine.writes import WriteFailure

Answer = Any   # a value, a WriteFailure to raise, or a callable(params, body) giving either


@dataclass
class Sent:
    method: str
    path: str
    params: dict[str, Any] | None
    body: Any
    raw: bool
    timeout: float | None


class FakeCalls(EngineCalls):
    def __init__(self, answers: dict[tuple[str, str], Answer] | None = None) -> None:
        super().__init__("unix:///nowhere.sock")
        self.answers: dict[tuple[str, str], Answer] = dict(answers or {})
        self.sent: list[Sent] = []

    def call(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
             expect_json: bool = True, raw: bool = False, timeout: float | None = None) -> Any:
        self.sent.append(Sent(method, path, params, body, raw, timeout))
        if (method, path) not in self.answers:
            raise WriteFailure("not_found", f"no such route {method} {path}")
        answer = self.answers[(method, path)]
        if callable(answer):
            answer = answer(params, body)
        if isinstance(answer, WriteFailure):
            raise answer
        return answer

    def paths(self) -> list[tuple[str, str]]:
        return [(s.method, s.path) for s in self.sent]


def swarm_object(version: int = 10, *, autolock: bool = False) -> dict[str, Any]:
    return {"ID": "swarm1", "Version": {"Index": version}, "UpdatedAt": "2026-11-25T17:08:06.808641404Z",
            "Spec": {"Name": "default", "Orchestration": {"TaskHistoryRetentionLimit": 5},
                     "Raft": {"SnapshotInterval": 10000, "KeepOldSnapshots": 0, "LogEntriesForSlowFollowers": 500,
                              "ElectionTick": 10, "HeartbeatTick": 1},
                     "Dispatcher": {"HeartbeatPeriod": 5000000000},
                     "CAConfig": {"NodeCertExpiry": 7776000000000000},
                     "EncryptionConfig": {"AutoLockManagers": autolock}},
            "JoinTokens": {"Worker": "SWMTKN-1-w", "Manager": "SWMTKN-1-m"}, "RootRotationInProgress": False}

