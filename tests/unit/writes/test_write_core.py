"""The shared write steps with a fake engine writer: level gate, Allow/Accept-Patch from the table, body
and precondition failures before any engine call, engine failures mapped to domain codes, ``Prefer``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.engine.writes import WriteFailure
from app.http.writes import MAX_BODY
from app.resources import ResourceKind
from app.writes.rollout import _judge
from tests.fakes import FakeEngine
from tests.unit.objects import SVC_MONITOR, SVC_WEB, cluster
from tests.unit.support import Harness, build_harness


class FakeWriter:
    """Records calls; applies service updates to a copy of the spec, or fails as told."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.calls: list[tuple[str, Any]] = []
        self.fail: WriteFailure | None = None
        self.last: dict[str, Any] | None = None

    def update_spec(self, kind: str, object_id: str, version: int, spec: dict[str, Any], *,
                    rollback: bool = False) -> None:
        self.calls.append(("update", (kind, object_id, version, spec, rollback)))
        if self.fail is not None:
            raise self.fail
        entry = self.harness.cache.get(ResourceKind(kind), object_id)
        assert entry is not None
        raw = copy.deepcopy(entry.raw)
        raw["Spec"] = spec
        raw["Version"] = {"Index": version + 1}
        self.last = raw

    def inspect(self, kind: str, object_id: str) -> dict[str, Any]:
        self.calls.append(("inspect", (kind, object_id)))
        if self.last is None:   # nothing written yet: the engine holds what the cache holds
            entry = self.harness.cache.get(ResourceKind(kind), object_id)
            assert entry is not None
            return copy.deepcopy(entry.raw)
        return self.last

    def service_status(self, service_id: str) -> dict[str, Any]:
        return {**(self.last or {}), "ServiceStatus": {"RunningTasks": 3, "DesiredTasks": 3}}

    def close(self) -> None:
        pass


def make(level: int) -> Iterator[tuple[FlaskClient, FakeWriter]]:
    harness = build_harness(FakeEngine(cluster()), operations_level=level)
    harness.start()
    writer = FakeWriter(harness)
    harness.runtime.writer = writer   # type: ignore[assignment]
    try:
        yield harness.app.test_client(), writer
    finally:
        harness.stop()


@pytest.fixture
def level1() -> Iterator[tuple[FlaskClient, FakeWriter]]:
    yield from make(1)


@pytest.fixture
def level0() -> Iterator[tuple[FlaskClient, FakeWriter]]:
    yield from make(0)


def test_level_0_refuses_with_ops001_before_anything(level0: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level0
    response = client.put(f"/services/{SVC_WEB}/scale", data=b"not json")
    assert response.status_code == 403
    body = response.get_json()
    assert body["code"] == "OPS001" and body["requiredLevel"] == 1 and body["configuredLevel"] == 0
    assert "level 1 (operational)" in body["detail"]
    assert writer.calls == []


def test_allow_on_a_service_detail_and_collections(level0: tuple[FlaskClient, FakeWriter],
                                                   level1: tuple[FlaskClient, FakeWriter]) -> None:
    assert level0[0].get(f"/services/{SVC_WEB}").headers["Allow"] == "GET, HEAD"
    assert level1[0].get(f"/services/{SVC_WEB}").headers["Allow"] == "GET, HEAD, POST, PUT"   # its family's
    assert "Accept-Patch" not in level1[0].get(f"/services/{SVC_WEB}").headers
    assert level1[0].get("/services").headers["Allow"] == "GET, HEAD"


def test_scale_answers_the_read_back_detail(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 5})
    assert response.status_code == 200
    assert response.get_json()["service"]["Spec"]["Mode"]["Replicated"]["Replicas"] == 5
    kind, object_id, version, spec, rollback = writer.calls[0][1]
    assert (kind, object_id, rollback) == ("service", SVC_WEB, False)
    assert version == 20 and spec["Mode"]["Replicated"]["Replicas"] == 5
    assert client.get(f"/services/{SVC_WEB}").get_json()["service"]["Version"]["Index"] == 21


def test_prefer_minimal_and_wait(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, _ = level1
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 3},
                          headers={"Prefer": "return=minimal, wait=5"})
    assert response.status_code == 204 and response.data == b""
    assert response.headers["Preference-Applied"] == "return=minimal, wait=5"
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 3}, headers={"Prefer": "wait=5"})
    assert response.get_json()["rollout"]["state"] == "converged"
    assert response.get_json()["rollout"]["settled"] is True


@pytest.mark.parametrize(("reason", "status", "code"), [
    ("out_of_sequence", 409, "SVC001"), ("not_found", 404, "SVC003"), ("invalid", 400, "ENG003"),
    ("unavailable", 503, "ENG001"), ("failed", 500, "ENG004"),
])
def test_engine_failures_map_to_codes(level1: tuple[FlaskClient, FakeWriter], reason: Any, status: int,
                                      code: str) -> None:
    client, writer = level1
    writer.fail = WriteFailure(reason, "engine says no")
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 4})
    assert response.status_code == status
    assert response.get_json()["code"] == code and "engine says no" in response.get_json()["detail"]


def test_body_and_precondition_failures_make_no_engine_call(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    big = b'{"replicas": 1, "pad": "' + b"x" * MAX_BODY + b'"}'
    assert client.put(f"/services/{SVC_WEB}/scale", data=big).get_json()["code"] == "API014"
    assert client.put(f"/services/{SVC_WEB}/scale", data=b"[1").get_json()["code"] == "API006"
    assert client.put(f"/services/{SVC_WEB}/scale", data=b"").get_json()["code"] == "API006"
    assert client.put(f"/services/{SVC_WEB}/scale", json=[1]).get_json()["code"] == "API006"
    assert client.put(f"/services/{SVC_MONITOR}/scale", json={"replicas": 1}).get_json()["code"] == "SVC005"
    stale = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 1}, headers={"If-Match": '"abc"'})
    assert stale.status_code == 412 and stale.get_json()["code"] == "SVC001"
    weak = client.get(f"/services/{SVC_WEB}").headers["ETag"]
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 1},
                      headers={"If-Match": "W/" + weak}).status_code == 412
    assert writer.calls == []
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 1},
                      headers={"If-Match": f'"x", {weak}'}).status_code == 200
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 1},
                      headers={"If-Match": "*"}).status_code == 200


def test_rollout_judgement() -> None:
    updating = {"UpdateStatus": {"State": "updating", "StartedAt": "t2"}}
    done = {"UpdateStatus": {"State": "completed", "StartedAt": "t2"}}
    old = {"UpdateStatus": {"State": "completed", "StartedAt": "t1"}}
    assert _judge(updating, True, "t1") is None
    assert _judge(old, True, "t1") is None            # the engine has not started this write's update
    assert _judge(done, True, "t1") == "completed"
    assert _judge({"ServiceStatus": {"RunningTasks": 1, "DesiredTasks": 2}}, False, None) is None
    assert _judge({"ServiceStatus": {"RunningTasks": 2, "DesiredTasks": 2}}, False, None) == "converged"
    assert _judge(None, False, None) == "removed"


def test_a_version_moved_by_the_engine_alone_is_retried(level1: tuple[FlaskClient, FakeWriter]) -> None:
    """The engine bumped the version (rollout progress) but the spec is the one read: the write goes
    through with the engine's version, under If-Match too (the tag holds: the spec is the one it showed);
    with another spec the 409 stands."""
    client, writer = level1
    harness = writer.harness
    entry = harness.cache.get(ResourceKind.SERVICE, SVC_WEB)
    assert entry is not None
    engine_state = copy.deepcopy(entry.raw)
    engine_state["Version"] = {"Index": 99}
    updates: list[int] = []

    def update_spec(kind: str, object_id: str, version: int, spec: dict[str, Any], *, rollback: bool = False) -> None:
        updates.append(version)
        if version != engine_state["Version"]["Index"]:
            raise WriteFailure("out_of_sequence", "update out of sequence")
        engine_state["Spec"] = spec
        engine_state["Version"] = {"Index": version + 1}
        writer.last = copy.deepcopy(engine_state)

    writer.update_spec = update_spec   # type: ignore[method-assign]
    writer.inspect = lambda kind, object_id: copy.deepcopy(engine_state)   # type: ignore[method-assign]
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 4}).status_code == 200
    assert updates == [20, 99]
    etag = client.get(f"/services/{SVC_WEB}").headers["ETag"]
    engine_state["Version"] = {"Index": 200}                         # status moved again
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 5}, headers={"If-Match": etag})
    assert response.status_code == 200 and updates[-2:] == [100, 200]
    engine_state["Spec"] = {**engine_state["Spec"], "Labels": {"someone": "else"}}   # and the spec
    engine_state["Version"] = {"Index": 300}
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 5})
    assert response.status_code == 409 and response.get_json()["code"] == "SVC001"
