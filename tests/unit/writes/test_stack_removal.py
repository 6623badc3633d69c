"""Stack removal's order and bookkeeping: services first, then networks, secrets, configs; members that are
gone are skipped; refusals while tasks shut down are retried until a deadline, then reported."""

from __future__ import annotations

from app.engine.writes import WriteFailure
from app.resources import ResourceKind
from app.writes.stack_removal import remove_members

SERVICE, NETWORK, SECRET, CONFIG = (ResourceKind.SERVICE, ResourceKind.NETWORK, ResourceKind.SECRET,
                                    ResourceKind.CONFIG)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_order_and_counts() -> None:
    calls: list[tuple[str, str]] = []
    members = {CONFIG: ["c1"], SERVICE: ["s1", "s2"], SECRET: ["x1"], NETWORK: ["n1"]}
    outcome = remove_members(members, lambda kind, oid: calls.append((kind.value, oid)))
    assert calls == [("service", "s1"), ("service", "s2"), ("network", "n1"), ("secret", "x1"), ("config", "c1")]
    assert outcome.document() == {"removed": {"services": 2, "networks": 1, "secrets": 1, "configs": 1}}


def test_members_already_gone_are_skipped_not_errors() -> None:
    def remove(kind: ResourceKind, oid: str) -> None:
        if oid == "gone":
            raise WriteFailure("not_found", "no such service")

    outcome = remove_members({SERVICE: ["gone", "s"]}, remove)
    assert outcome.document() == {"removed": {"services": 1, "networks": 0, "secrets": 0, "configs": 0}}


def test_in_use_is_retried_until_the_tasks_are_gone() -> None:
    clock = Clock()
    attempts = {"n1": 0}

    def remove(kind: ResourceKind, oid: str) -> None:
        if oid == "n1":
            attempts["n1"] += 1
            if attempts["n1"] < 3:
                raise WriteFailure("in_use", "network n1 is in use by task t1")

    outcome = remove_members({SERVICE: ["s"], NETWORK: ["n1"]}, remove, clock=clock, sleep=clock.sleep,
                             interval=0.5, settle=10)
    assert attempts["n1"] == 3 and clock.now == 1.0
    assert outcome.document()["removed"]["networks"] == 1 and "errors" not in outcome.document()


def test_refusals_past_the_deadline_are_reported() -> None:
    clock = Clock()

    def remove(kind: ResourceKind, oid: str) -> None:
        if kind is CONFIG:
            raise WriteFailure("in_use", "config c1 is in use by task t")

    outcome = remove_members({CONFIG: ["c1"], SECRET: ["x1"]}, remove, clock=clock, sleep=clock.sleep,
                             interval=0.5, settle=3)
    body = outcome.document()
    assert body["removed"] == {"services": 0, "networks": 0, "secrets": 1, "configs": 0}
    assert body["errors"] == [{"type": "config", "id": "c1", "error": "config c1 is in use by task t"}]
    assert clock.now <= 3


def test_a_service_refusal_stops_the_retries() -> None:
    clock = Clock()

    def remove(kind: ResourceKind, oid: str) -> None:
        if kind is SERVICE:
            raise WriteFailure("failed", "rpc error")
        raise WriteFailure("in_use", "in use by task")

    outcome = remove_members({SERVICE: ["s"], NETWORK: ["n"]}, remove, clock=clock, sleep=clock.sleep)
    assert clock.now == 0
    assert [e["type"] for e in outcome.document()["errors"]] == ["service", "network"]
