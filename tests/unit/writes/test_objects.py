"""Create bodies of configs, secrets, networks and volumes, and node availability/role: the engine body
each turns into, and the domain's 400 code for each kind of mistake (nothing reaches the engine)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from app.errors import ProblemError
from app.writes import objects

B64 = base64.b64encode(b"hello").decode()


def code_of(call: Any) -> str:
    with pytest.raises(ProblemError) as caught:
        call()
    return caught.value.code


@pytest.mark.parametrize("kind,code", [("config", "CFG004"), ("secret", "SEC004")])
def test_config_and_secret_bodies(kind: str, code: str) -> None:
    assert objects.config_create(kind, {"name": "app.conf", "data": B64}) == \
        {"Name": "app.conf", "Data": B64, "Labels": {}}
    assert objects.config_create(kind, {"name": "a", "data": B64, "labels": {"x": "y"}})["Labels"] == {"x": "y"}
    bad: list[Any] = [{"data": B64}, {"name": "", "data": B64}, {"name": "-bad", "data": B64},
                 {"name": "bad-", "data": B64}, {"name": "sp ace", "data": B64}, {"name": "x" * 65, "data": B64},
                 {"name": "ok"}, {"name": "ok", "data": "not base64!"}, {"name": "ok", "data": "aGVsbG8"},
                 {"name": "ok", "data": ""}, {"name": "ok", "data": 5}, {"name": "ok", "data": B64, "labels": {"a": 1}},
                 {"name": "ok", "data": B64, "extra": 1}, [], "x"]
    for body in bad:
        assert code_of(lambda body=body: objects.config_create(kind, body)) == code, body


def test_data_size_limits_follow_the_engine() -> None:
    big = base64.b64encode(b"x" * (500 * 1024 + 1)).decode()
    assert code_of(lambda: objects.config_create("secret", {"name": "s", "data": big})) == "SEC004"
    assert objects.config_create("config", {"name": "c", "data": big})["Name"] == "c"


def test_network_body_defaults_and_checks() -> None:
    assert objects.network_create({"name": "t-net"}) == {
        "Name": "t-net", "Driver": "overlay", "Attachable": False, "Internal": False, "Labels": {}, "Options": {},
        "CheckDuplicate": True}
    full = objects.network_create({"name": "n1", "driver": "bridge", "attachable": True, "internal": True,
                                   "labels": {"a": "b"}, "options": {"com.docker.network.driver.mtu": "1400"}})
    assert full["Driver"] == "bridge" and full["Attachable"] and full["Internal"]
    assert full["Options"] == {"com.docker.network.driver.mtu": "1400"}
    for body in ({}, {"name": ""}, {"name": "a b"}, {"name": "n", "driver": ""}, {"name": "n", "driver": 3},
                 {"name": "n", "attachable": "yes"}, {"name": "n", "labels": []}, {"name": "n", "options": {"a": 1}},
                 {"name": "n", "scope": "swarm"}, None):
        assert code_of(lambda body=body: objects.network_create(body)) == "NET004", body


def test_volume_body_defaults_and_checks() -> None:
    assert objects.volume_create({"name": "t-vol"}) == {"Name": "t-vol", "Driver": "local", "Labels": {},
                                                        "DriverOpts": {}}
    assert objects.volume_create({"name": "v1", "driverOpts": {"type": "tmpfs"}})["DriverOpts"] == {"type": "tmpfs"}
    for body in ({}, {"name": "v"}, {"name": "_v"}, {"name": "v/x"}, {"name": "vv", "driver": "a b"},
                 {"name": "vv", "driverOpts": {"a": True}}, {"name": "vv", "options": {}}, ["vv"]):
        assert code_of(lambda body=body: objects.volume_create(body)) == "VOL003", body


def test_availability_and_role() -> None:
    assert [objects.availability({"availability": a}) for a in ("active", "pause", "drain")] == \
        ["active", "pause", "drain"]
    assert objects.role({"role": "manager"}) == "manager"
    bad: list[Any] = [{}, {"availability": "Drain"}, {"availability": None}, [], "drain"]
    for body in bad:
        assert code_of(lambda body=body: objects.availability(body)) == "NOD004"
    roles: list[Any] = [{}, {"role": "leader"}, {"role": 1}]
    for body in roles:
        assert code_of(lambda body=body: objects.role(body)) == "NOD005"


def test_role_document_counts_managers_by_spec_role() -> None:
    leader: dict[str, Any] = {"Spec": {"Role": "manager"}, "ManagerStatus": {"Leader": True}}
    promoted: dict[str, Any] = {"Spec": {"Role": "manager"}}       # promotion requested, not yet reachable
    worker: dict[str, Any] = {"Spec": {"Role": "worker"}}
    nodes = [leader, promoted, worker]
    assert objects.role_document(leader, nodes) == {"role": "manager", "isLeader": True, "managerCount": 2}
    assert objects.role_document(worker, nodes) == {"role": "worker", "isLeader": False, "managerCount": 2}
    assert objects.role_document({}, [])["role"] == "worker"
