"""ACL on writes (docs/acl.md) with the headers provider and a fake engine writer: 403 ACL002 on
every target type with ``resource``/``permission``, OPS001 before ACL002, creates on ``<type>:*``, task
writes through the parent service, unknown ids on ``<type>:<id>``, Allow/Accept-Patch per caller, /swarm
join tokens, and /auth/whoami and /profile in modes none and headers."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.blueprints import swarm as swarm_views
from app.engine.swarm import SwarmEngine
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit.objects import (
    CFG_OTHER,
    CFG_SHOP,
    NET_INGRESS,
    NET_SHOP,
    NODE_MANAGER,
    NODE_WORKER,
    SEC_SHOP,
    SVC_DB,
    SVC_MONITOR,
    SVC_WEB,
    TASK_MON_MANAGER,
    TASK_WEB_1,
    cluster,
)
from tests.unit.support import Harness, build_harness
from tests.unit.swarm.fakes import FakeCalls, swarm_object

MERGE = "application/merge-patch+json"
POLICY = {"grants": [
    {"resources": ["stack:shop"], "audience": ["user:alice"], "permissions": ["read"]},
    {"resources": ["service:shop_web_api"], "audience": ["user:bob"], "permissions": ["read", "write"]},
    {"resources": ["stack:shop", "config:*"], "audience": ["group:ops"], "permissions": ["write"]},
    {"resources": ["swarm:cluster", "node:worker-*"], "audience": ["user:erin"], "permissions": ["write"]},
    {"resources": ["node:*"], "audience": ["user:erin"], "permissions": ["read"]},
    {"resources": ["service:*"], "audience": ["user:frank"], "permissions": ["write"]},
    {"resources": ["plugin:good"], "audience": ["user:frank"], "permissions": ["write"]},
]}


class RecordingWriter:
    """Records every engine write; service/node/config/secret spec updates are applied to a copy."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.calls: list[tuple[str, Any]] = []
        self.last: dict[str, Any] | None = None

    def update_spec(self, kind: str, object_id: str, version: int, spec: dict[str, Any], *,
                    rollback: bool = False) -> None:
        self.calls.append(("update", (kind, object_id)))
        entry = self.harness.cache.get(ResourceKind(kind), object_id)
        assert entry is not None
        self.last = {**copy.deepcopy(entry.raw), "Spec": spec, "Version": {"Index": version + 1}}

    def inspect(self, kind: str, object_id: str) -> dict[str, Any]:
        if self.last is not None:
            return self.last
        entry = self.harness.cache.get(ResourceKind(kind), object_id)
        assert entry is not None
        return copy.deepcopy(entry.raw)

    def has_container(self, container: str) -> bool:
        self.calls.append(("has_container", container))
        return False

    def remove(self, kind: str, object_id: str, *, force: bool = False) -> None:
        self.calls.append(("remove", (kind, object_id)))

    def create(self, kind: str, body: dict[str, Any]) -> str:
        self.calls.append(("create", (kind, body["Name"])))
        return CFG_OTHER

    def close(self) -> None:
        pass


def start(level: int = 3, policy: dict[str, Any] | None = POLICY, mode: str = "headers"
          ) -> tuple[Harness, RecordingWriter]:
    settings: dict[str, Any] = {"operations_level": level}
    if mode == "headers":
        settings.update(auth_mode="headers", headers_subject="X-User", headers_groups="X-Groups",
                        trusted_proxies=("127.0.0.1/32",))
    if policy is not None:
        settings["acl_policy"] = json.dumps(policy)
    harness = build_harness(FakeEngine(cluster()), **settings)
    harness.start()
    writer = RecordingWriter(harness)
    harness.runtime.writer = writer   # type: ignore[assignment]
    harness.app.extensions[swarm_views.ENGINE_KEY] = SwarmEngine(FakeCalls({
        ("GET", "/swarm"): swarm_object(), ("POST", "/swarm/update"): None}))
    return harness, writer


@pytest.fixture
def lab() -> Iterator[tuple[Harness, RecordingWriter]]:
    harness, writer = start()
    yield harness, writer
    harness.stop()


def as_user(user: str, groups: str = "") -> dict[str, str]:
    headers = {"X-User": user}
    if groups:
        headers["X-Groups"] = groups
    return headers


def refused(response: Any, resource: str) -> None:
    assert response.status_code == 403, response.get_data(as_text=True)
    body = response.get_json()
    assert body["code"] == "ACL002", body
    assert body["resource"] == resource and body["permission"] == "write"


def labels(client: FlaskClient, path: str, user: str, groups: str = "") -> Any:
    """A merge patch of one label (a PUT would drop the stack label, and with it the stack's grants)."""
    return client.patch(f"{path}/labels", data=json.dumps({"team": "x"}), content_type=MERGE,
                        headers=as_user(user, groups))


# ---------------------------------------------------------------------------------------------- services
def test_service_writes_need_write_on_the_service_or_its_stack(lab: tuple[Harness, RecordingWriter]) -> None:
    harness, writer = lab
    client = harness.app.test_client()
    assert labels(client, f"/services/{SVC_WEB}", "bob").status_code == 200          # service:shop_web_api
    assert labels(client, f"/services/{SVC_DB}", "carol", "ops").status_code == 200  # stack:shop
    refused(labels(client, f"/services/{SVC_DB}", "bob"), f"service:{SVC_DB}")      # bob may not read it
    refused(labels(client, f"/services/{SVC_WEB}", "alice"), "service:shop_web_api")  # read only: named
    refused(labels(client, f"/services/{SVC_MONITOR}", "carol", "ops"), f"service:{SVC_MONITOR}")
    refused(labels(client, f"/services/{SVC_WEB}", "dave"), f"service:{SVC_WEB}")
    assert [call[1] for call in writer.calls] == [("service", SVC_WEB), ("service", SVC_DB)]


def test_an_unknown_id_falls_back_to_its_own_key(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    refused(client.put("/services/nope/scale", json={"replicas": 1}, headers=as_user("bob")), "service:nope")
    answer = client.put("/services/nope/scale", json={"replicas": 1}, headers=as_user("frank"))
    assert answer.status_code == 404 and answer.get_json()["code"] == "SVC003"   # service:* passes the ACL


def test_ops001_comes_before_acl002() -> None:
    harness, writer = start(level=1)
    try:
        client = harness.app.test_client()
        body = labels(client, f"/services/{SVC_WEB}", "dave").get_json()   # tier 2 at level 1
        assert body["code"] == "OPS001"
        refused(client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 2}, headers=as_user("dave")),
                f"service:{SVC_WEB}")
        assert labels(client, f"/services/{SVC_WEB}", "bob").get_json()["code"] == "OPS001"
        assert writer.calls == []
    finally:
        harness.stop()


# ---------------------------------------------------------------------------------------------- other types
def test_tasks_are_written_through_their_parent_service(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    refused(client.delete(f"/tasks/{TASK_MON_MANAGER}", headers=as_user("bob")), f"task:{TASK_MON_MANAGER}")
    refused(client.delete(f"/tasks/{TASK_WEB_1}", headers=as_user("alice")), "service:shop_web_api")
    for user, groups in (("bob", ""), ("carol", "ops")):   # service:shop_web_api, stack:shop
        answer = client.delete(f"/tasks/{TASK_WEB_1}", headers=as_user(user, groups))
        assert answer.get_json()["code"] == "TSK003"   # past the gate: the fake engine has no container
    refused(client.delete("/tasks/ghost", headers=as_user("bob")), "task:ghost")


def test_nodes_by_hostname(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    assert labels(client, f"/nodes/{NODE_WORKER}", "erin").status_code == 200
    refused(labels(client, f"/nodes/{NODE_MANAGER}", "erin"), "node:manager-1")   # erin reads every node
    refused(labels(client, f"/nodes/{NODE_WORKER}", "bob"), f"node:{NODE_WORKER}")


def test_configs_secrets_networks_volumes_stacks(lab: tuple[Harness, RecordingWriter]) -> None:
    harness, writer = lab
    client = harness.app.test_client()
    ops = as_user("carol", "ops")
    assert labels(client, f"/configs/{CFG_SHOP}", "carol", "ops").status_code == 200
    assert labels(client, f"/secrets/{SEC_SHOP}", "carol", "ops").status_code == 200
    refused(labels(client, f"/secrets/{SEC_SHOP}", "alice"), "secret:shop_db_password")
    refused(client.delete(f"/networks/{NET_INGRESS}", headers=ops), f"network:{NET_INGRESS}")
    refused(client.delete(f"/networks/{NET_SHOP}", headers=as_user("alice")), "network:shop_default")
    refused(client.delete("/volumes/scratch", headers=ops), "volume:scratch")
    assert client.delete("/volumes/shop_data", headers=ops).status_code == 204
    refused(client.delete("/stacks/shop", headers=as_user("bob")), "stack:shop")
    refused(client.post("/plugins/bad/enable", headers=as_user("frank")), "plugin:bad")
    assert ("remove", ("volume", "shop_data")) in writer.calls


def test_creates_need_write_on_type_star(lab: tuple[Harness, RecordingWriter]) -> None:
    harness, writer = lab
    client = harness.app.test_client()
    body = {"name": "fresh", "data": "aGVsbG8="}
    refused(client.post("/secrets", json=body, headers=as_user("carol", "ops")), "secret:*")
    refused(client.post("/configs", json=body, headers=as_user("bob")), "config:*")
    refused(client.post("/networks", json={"name": "n"}, headers=as_user("frank")), "network:*")
    assert client.post("/configs", json=body, headers=as_user("carol", "ops")).status_code == 201
    assert ("create", ("config", "fresh")) in writer.calls


def test_swarm_writes_and_join_tokens(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    refused(client.patch("/swarm/raft", data=b"{}", content_type=MERGE, headers=as_user("bob")), "swarm:cluster")
    refused(client.post("/swarm/rotate-token", json={"target": "worker"}, headers=as_user("carol", "ops")),
            "swarm:cluster")
    tokens = {user: client.get("/swarm", headers=as_user(user)).get_json()["swarm"]["JoinTokens"]
              for user in ("erin", "bob")}
    assert tokens["erin"] == swarm_object()["JoinTokens"] and tokens["erin"]["Worker"]
    assert tokens["bob"] == {"Worker": "", "Manager": ""}
    assert client.get("/swarm/unlock-key", headers=as_user("bob")).get_json()["code"] == "ACL002"


# ---------------------------------------------------------------------------------------------- Allow
def allow(client: FlaskClient, path: str, user: str, groups: str = "") -> tuple[list[str], str | None]:
    response = client.get(path, headers=as_user(user, groups))
    return [m.strip() for m in response.headers["Allow"].split(",")], response.headers.get("Accept-Patch")


def test_allow_and_accept_patch_follow_the_callers_write_permission(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    assert allow(client, f"/services/{SVC_WEB}", "bob")[0] == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    assert allow(client, f"/services/{SVC_WEB}", "alice")[0] == ["GET", "HEAD"]
    assert allow(client, f"/services/{SVC_WEB}/labels", "bob") == (["GET", "HEAD", "PUT", "PATCH"],
                                                                   "application/json-patch+json, " + MERGE)
    assert allow(client, f"/services/{SVC_WEB}/labels", "alice") == (["GET", "HEAD"], None)
    assert "POST" in allow(client, "/configs", "carol", "ops")[0]
    assert "POST" not in allow(client, "/configs", "bob")[0]
    assert "POST" not in allow(client, "/secrets", "carol", "ops")[0]
    assert allow(client, f"/nodes/{NODE_WORKER}/labels", "erin")[1] is not None
    assert allow(client, f"/nodes/{NODE_MANAGER}/labels", "erin") == (["GET", "HEAD"], None)


def test_without_a_policy_everyone_writes() -> None:
    harness, _ = start(policy=None)
    try:
        client = harness.app.test_client()
        assert labels(client, f"/services/{SVC_MONITOR}", "dave").status_code == 200
        assert allow(client, f"/services/{SVC_WEB}", "dave")[0] == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    finally:
        harness.stop()


# ---------------------------------------------------------------------------------------------- whoami
def test_whoami_and_profile_in_headers_mode(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    for path, kind in (("/auth/whoami", "Identity"), ("/profile", "Profile")):
        response = client.get(path, headers=as_user("carol", "ops,dev"))
        body = response.get_json()
        assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
        assert {"Authorization", "Cookie"} <= set(response.vary)
        assert body["@id"] == path and body["@type"] == kind
        assert (body["subject"], body["provider"], body["groups"]) == ("carol", "headers", ["ops", "dev"])
        assert body["permissions"] == {"config:*": ["read", "write"], "stack:shop": ["read", "write"]}
        assert client.get(path, headers=as_user("dave")).get_json()["permissions"] == {}
        missing = client.get(path)
        assert missing.status_code == 401 and missing.get_json()["code"] == "AUT001"
        assert missing.headers["WWW-Authenticate"]


def test_whoami_without_a_policy_and_in_mode_none() -> None:
    for mode, headers, subject in (("headers", as_user("alice"), "alice"), ("none", {}, "anonymous")):
        harness, _ = start(policy=None, mode=mode)
        try:
            client = harness.app.test_client()
            for path in ("/auth/whoami", "/profile"):
                body = client.get(path, headers=headers).get_json()
                assert body["subject"] == subject and body["provider"] == mode
                assert "permissions" not in body
        finally:
            harness.stop()
