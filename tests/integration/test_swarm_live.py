"""/swarm against the lab engine, checked with the engine's own inspect and the docker CLI: join tokens by
level, settings patches (each restored: other tests rely on the lab's 5 s heartbeat and retention 5), an
out-of-sequence update, token / unlock-key / CA rotation, autolock and the unlock key (always turned off
again: a locked lab would stay locked after a dockerd restart), unlock refusals, and the level gate."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from app.blueprints import swarm as swarm_views
from tests.conftest import start_runtime_app, wait_for

pytestmark = pytest.mark.integration
MERGE = "application/merge-patch+json"
DAY = 86_400 * 10**9


@pytest.fixture(scope="module")
def apps(docker_host: str, engine: docker.APIClient) -> Iterator[dict[int, Any]]:
    """Apps at operations levels 1, 2 and 3; at teardown the swarm settings are put back as they were."""
    original = engine.inspect_swarm()["Spec"]
    started = {level: start_runtime_app(docker_host, operations_level=level) for level in (1, 2, 3)}
    try:
        yield {level: app for level, (app, _) in started.items()}
    finally:
        for _, runtime in started.values():
            runtime.stop()
        restore(engine, original)


def restore(engine: docker.APIClient, original: dict[str, Any]) -> None:
    """Put back the settings these tests change (ForceRotate stays: it only counts rotations)."""
    for _ in range(5):
        swarm = engine.inspect_swarm()
        spec = swarm["Spec"]
        wanted = {**spec, **{key: original[key] for key in ("Orchestration", "Raft", "Dispatcher",
                                                             "EncryptionConfig") if key in original}}
        wanted["CAConfig"] = {**spec.get("CAConfig", {}),
                              "NodeCertExpiry": original.get("CAConfig", {}).get("NodeCertExpiry")}
        if wanted == spec:
            return
        with contextlib.suppress(docker.errors.APIError):   # out of sequence: read again
            engine.update_swarm(version=swarm["Version"]["Index"], swarm_spec=wanted)
    raise AssertionError("the swarm settings could not be restored")


def cli(docker_host: str, *args: str) -> str:
    done = subprocess.run(["docker", *args], env={**os.environ, "DOCKER_HOST": docker_host}, capture_output=True,
                          text=True, timeout=30, check=True)
    return done.stdout.strip()


def spec(engine: docker.APIClient) -> dict[str, Any]:
    found: dict[str, Any] = engine.inspect_swarm()["Spec"]
    return found


def patch(app: Any, path: str, body: Any, **headers: str) -> Any:
    return app.test_client().patch(path, data=json.dumps(body), content_type=MERGE, headers=headers)


# ---------------------------------------------------------------------------------------------- reads
def test_join_tokens_are_shown_only_to_who_may_rotate_them(apps: dict[int, Any], docker_host: str,
                                                           engine: docker.APIClient) -> None:
    worker, manager = cli(docker_host, "swarm", "join-token", "-q", "worker"), \
        cli(docker_host, "swarm", "join-token", "-q", "manager")
    leader = next(n for n in engine.nodes() if (n.get("ManagerStatus") or {}).get("Leader"))
    for level, tokens in ((1, {"Worker": "", "Manager": ""}), (2, {"Worker": "", "Manager": ""}),
                          (3, {"Worker": worker, "Manager": manager})):
        response = apps[level].test_client().get("/swarm")
        assert response.status_code == 200
        body = response.get_json()
        assert body["@type"] == "Swarm" and body["@id"] == "/swarm"
        assert body["swarm"]["ID"] == engine.inspect_swarm()["ID"]
        assert body["swarm"]["JoinTokens"] == tokens, level
        assert body["managerAddr"] == leader["ManagerStatus"]["Addr"]
        assert response.headers["ETag"] and response.headers["Last-Modified"]
        # a detail lists its family's writes (docs/writes.md): the settings PATCH ≥2, the rotations POST at 3
        allow = {1: "GET, HEAD", 2: "GET, HEAD, PATCH", 3: "GET, HEAD, POST, PATCH"}[level]
        assert response.headers["Allow"] == allow
        assert response.headers.get("Accept-Patch") == (None if level < 2 else "application/merge-patch+json")


# ---------------------------------------------------------------------------------------------- settings
def test_orchestration_raft_and_dispatcher_at_level_2(apps: dict[int, Any], engine: docker.APIClient) -> None:
    before = spec(engine)
    try:
        response = patch(apps[2], "/swarm/orchestration", {"TaskHistoryRetentionLimit": 7})
        assert response.status_code == 200, response.get_json()
        body = response.get_json()
        assert body["@type"] == "SwarmOrchestration" and body["@id"] == "/swarm/orchestration"
        assert body["orchestration"] == spec(engine)["Orchestration"] == {"TaskHistoryRetentionLimit": 7}

        response = patch(apps[2], "/swarm/raft", {"SnapshotInterval": 10001, "KeepOldSnapshots": 0})
        assert response.status_code == 200
        raft = spec(engine)["Raft"]
        assert raft["SnapshotInterval"] == 10001 and raft["KeepOldSnapshots"] == before["Raft"]["KeepOldSnapshots"]
        assert response.get_json()["raft"] == raft

        response = patch(apps[2], "/swarm/dispatcher", {"HeartbeatPeriod": 6 * 10**9},
                         Prefer="return=minimal")
        assert response.status_code == 204 and response.headers["Preference-Applied"] == "return=minimal"
        assert spec(engine)["Dispatcher"]["HeartbeatPeriod"] == 6 * 10**9
    finally:
        restore(engine, before)
    assert spec(engine)["Dispatcher"] == before["Dispatcher"]
    assert spec(engine)["Orchestration"] == before["Orchestration"]


def test_bad_settings_patches_write_nothing(apps: dict[int, Any], engine: docker.APIClient) -> None:
    version = engine.inspect_swarm()["Version"]["Index"]
    client = apps[3].test_client()
    for body in ({"ElectionTick": 3}, {"TaskHistoryRetentionLimit": -1}, {"TaskHistoryRetentionLimit": "5"}, [1]):
        response = patch(apps[3], "/swarm/orchestration", body)
        assert response.status_code == 400 and response.get_json()["code"] == "API006", body
    response = client.patch("/swarm/orchestration", data=b"{", content_type=MERGE)
    assert response.status_code == 400 and response.get_json()["code"] == "API008"
    response = client.patch("/swarm/orchestration", json={"TaskHistoryRetentionLimit": 6})
    assert response.status_code == 415 and response.headers["Accept-Patch"] == MERGE
    response = patch(apps[3], "/swarm/orchestration", {"TaskHistoryRetentionLimit": 0})   # 0: unchanged
    assert response.status_code == 200
    assert response.get_json()["orchestration"] == spec(engine)["Orchestration"]
    assert engine.inspect_swarm()["Version"]["Index"] == version


def test_ca_node_cert_expiry_at_level_3(apps: dict[int, Any], engine: docker.APIClient) -> None:
    before = spec(engine)
    try:
        response = patch(apps[2], "/swarm/ca", {"NodeCertExpiry": 91 * DAY})
        assert response.status_code == 403 and response.get_json()["code"] == "OPS001"
        response = patch(apps[3], "/swarm/ca", {"NodeCertExpiry": 91 * DAY})
        assert response.status_code == 200, response.get_json()
        assert spec(engine)["CAConfig"]["NodeCertExpiry"] == 91 * DAY
        assert response.get_json()["caConfig"]["NodeCertExpiry"] == 91 * DAY
    finally:
        restore(engine, before)
    assert spec(engine)["CAConfig"]["NodeCertExpiry"] == before["CAConfig"]["NodeCertExpiry"]


def test_an_update_based_on_a_stale_read_is_409(apps: dict[int, Any], engine: docker.APIClient) -> None:
    """Someone else changes the swarm between Shoal's read and its write: the engine refuses the stale
    version and Shoal answers 409 SWM012 (nothing of this request is written)."""
    app = apps[3]
    app.test_client().get("/swarm")
    swarm_engine = app.extensions[swarm_views.ENGINE_KEY]
    read = swarm_engine.version_and_spec

    def read_then_someone_writes() -> tuple[int, dict[str, Any]]:
        found: tuple[int, dict[str, Any]] = read()
        current = engine.inspect_swarm()
        engine.update_swarm(version=current["Version"]["Index"], swarm_spec=current["Spec"], rotate_worker_token=True)
        return found

    swarm_engine.version_and_spec = read_then_someone_writes
    try:
        response = patch(app, "/swarm/orchestration", {"TaskHistoryRetentionLimit": 8})
    finally:
        del swarm_engine.version_and_spec
    assert response.status_code == 409, response.get_json()
    assert response.get_json()["code"] == "SWM012"
    assert spec(engine)["Orchestration"]["TaskHistoryRetentionLimit"] != 8


# ---------------------------------------------------------------------------------------------- rotations
def test_rotate_the_worker_token(apps: dict[int, Any], docker_host: str) -> None:
    worker = cli(docker_host, "swarm", "join-token", "-q", "worker")
    manager = cli(docker_host, "swarm", "join-token", "-q", "manager")
    client = apps[3].test_client()
    for body in ({"target": "nobody"}, {}, None):
        response = client.post("/swarm/rotate-token", json=body)
        assert response.status_code == 400 and response.get_json()["code"] == "SWM011"
    response = client.post("/swarm/rotate-token", json={"target": "worker"})
    assert response.status_code == 204 and response.data == b""
    assert cli(docker_host, "swarm", "join-token", "-q", "worker") != worker
    assert cli(docker_host, "swarm", "join-token", "-q", "manager") == manager
    assert client.get("/swarm").get_json()["swarm"]["JoinTokens"]["Worker"] == \
        cli(docker_host, "swarm", "join-token", "-q", "worker")


def test_autolock_and_the_unlock_key(apps: dict[int, Any], docker_host: str, engine: docker.APIClient) -> None:
    client = apps[3].test_client()
    assert not spec(engine)["EncryptionConfig"]["AutoLockManagers"], "the lab must start unlocked"
    response = client.get("/swarm/unlock-key")
    assert response.status_code == 409 and response.get_json()["code"] == "SWM009"
    response = client.post("/swarm/rotate-unlock-key")
    assert response.status_code == 409 and response.get_json()["code"] == "SWM007"
    try:
        response = patch(apps[3], "/swarm/encryption", {"AutoLockManagers": True})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["encryption"] == {"AutoLockManagers": True}
        assert spec(engine)["EncryptionConfig"]["AutoLockManagers"] is True

        response = client.get("/swarm/unlock-key")
        assert response.status_code == 200
        key = response.get_json()["unlockKey"]
        assert key.startswith("SWMKEY-1-") and key == cli(docker_host, "swarm", "unlock-key", "-q")
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["Allow"] == "GET, HEAD"
        assert apps[2].test_client().get("/swarm/unlock-key").status_code == 403

        response = client.post("/swarm/rotate-unlock-key")
        assert response.status_code == 204
        rotated = cli(docker_host, "swarm", "unlock-key", "-q")
        assert rotated != key and client.get("/swarm/unlock-key").get_json()["unlockKey"] == rotated
    finally:
        current = engine.inspect_swarm()   # off again whatever happened above
        if current["Spec"]["EncryptionConfig"]["AutoLockManagers"]:
            engine.update_swarm(version=current["Version"]["Index"],
                                swarm_spec={**current["Spec"], "EncryptionConfig": {"AutoLockManagers": False}})
    assert spec(engine)["EncryptionConfig"]["AutoLockManagers"] is False


def test_unlock_refusals(apps: dict[int, Any]) -> None:
    client = apps[3].test_client()
    for body in ({}, {"unlockKey": ""}, {"unlockKey": 5}, None):
        response = client.post("/swarm/unlock", json=body)
        assert response.status_code == 400 and response.get_json()["code"] == "SWM010"
    response = client.post("/swarm/unlock", json={"unlockKey": "SWMKEY-1-notlocked"})
    assert response.status_code == 409 and response.get_json()["code"] == "SWM008"
    assert "not locked" in response.get_json()["detail"]


def test_force_rotate_ca(apps: dict[int, Any], engine: docker.APIClient) -> None:
    """On the one-node lab the rotation takes about 3 s; the lab keeps serving."""
    before = engine.inspect_swarm()
    started = time.monotonic()
    response = apps[3].test_client().post("/swarm/force-rotate-ca")
    assert response.status_code == 204
    after = engine.inspect_swarm()
    assert after["Spec"]["CAConfig"].get("ForceRotate", 0) == before["Spec"]["CAConfig"].get("ForceRotate", 0) + 1

    def rotated() -> bool:
        now = engine.inspect_swarm()
        return not now["RootRotationInProgress"] and now["TLSInfo"]["TrustRoot"] != before["TLSInfo"]["TrustRoot"]

    wait_for(rotated, 60, interval=0.5, message="the CA rotation to finish")
    assert time.monotonic() - started < 60
    assert all(n["Status"]["State"] == "ready" for n in engine.nodes())
    assert apps[3].test_client().get("/nodes").status_code == 200


# ---------------------------------------------------------------------------------------------- the gate
WRITES = [("PATCH", "/swarm/orchestration", {"TaskHistoryRetentionLimit": 6}, 2),
          ("PATCH", "/swarm/raft", {"SnapshotInterval": 10002}, 2),
          ("PATCH", "/swarm/dispatcher", {"HeartbeatPeriod": 7 * 10**9}, 2),
          ("PATCH", "/swarm/ca", {"NodeCertExpiry": 92 * DAY}, 3),
          ("PATCH", "/swarm/encryption", {"AutoLockManagers": True}, 3),
          ("POST", "/swarm/rotate-token", {"target": "worker"}, 3),
          ("POST", "/swarm/rotate-unlock-key", None, 3),
          ("POST", "/swarm/force-rotate-ca", None, 3),
          ("POST", "/swarm/unlock", {"unlockKey": "SWMKEY-1-x"}, 3),
          ("GET", "/swarm/unlock-key", None, 3)]


@pytest.mark.parametrize(("method", "path", "body", "tier"), WRITES)
def test_the_level_below_each_tier_is_refused(apps: dict[int, Any], engine: docker.APIClient, method: str,
                                              path: str, body: Any, tier: int) -> None:
    version = engine.inspect_swarm()["Version"]["Index"]
    kwargs: dict[str, Any] = {} if body is None else {"data": json.dumps(body), "content_type": MERGE}
    response = apps[tier - 1].test_client().open(path, method=method, **kwargs)
    assert response.status_code == 403
    problem = response.get_json()
    assert problem["code"] == "OPS001" and problem["requiredLevel"] == tier
    assert engine.inspect_swarm()["Version"]["Index"] == version
