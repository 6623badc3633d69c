"""The operations level against the lab engine, driven by the operation table itself: every write is
refused with 403 OPS001 at the level below its tier (and nothing changes on the engine), and on every URL
that answers GET, ``Allow`` and ``Accept-Patch`` list exactly the writes the level lets through: on a detail,
those of its whole family (docs/writes.md), elsewhere those of the URL itself."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from flask import Flask

from app.writes.operations import OPERATIONS, Operation, Tier
from tests.conftest import start_runtime_app, wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def apps(docker_host: str) -> Iterator[dict[int, Flask]]:
    started = {level: start_runtime_app(docker_host, operations_level=level) for level in range(4)}
    yield {level: app for level, (app, _) in started.items()}
    for _, runtime in started.values():
        runtime.stop()


@pytest.fixture(scope="module")
def objects(docker_host: str, apps: dict[int, Flask]) -> Iterator[dict[str, str]]:
    """One object of each kind, made for this module (the stack and node are the lab's: refused writes
    never reach them)."""
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    suffix = uuid.uuid4().hex[:8]
    service = sleeper(client, f"t-level-{suffix}")
    config = client.configs.create(name=f"t-level-{suffix}", data=b"x")
    secret = client.secrets.create(name=f"t-level-{suffix}", data=b"x")
    network = client.networks.create(f"t-level-{suffix}", driver="overlay", attachable=True)
    volume = client.volumes.create(f"t-level-{suffix}")
    api = client.api
    task = wait_for(lambda: api.tasks(filters={"service": service.id}), 20, message="a task")[0]  # type: ignore[index]
    node = api.nodes()[0]["ID"]
    ids = {"service": service.id, "task": task["ID"], "node": node, "config": config.id, "secret": secret.id,
           "network": network.id, "volume": volume.name, "stack": "demo", "plugin": "t-level-none"}
    for app in apps.values():
        test = app.test_client()
        for kind, plural in (("service", "services"), ("config", "configs"), ("secret", "secrets"),
                             ("network", "networks"), ("volume", "volumes"), ("task", "tasks")):
            wait_for(lambda t=test, p=plural, k=kind: t.get(f"/{p}/{ids[k]}").status_code == 200, 20,  # type: ignore[misc]
                     message=f"{kind} cached")
    yield ids
    service.remove()
    for obj in (config, secret, network):
        obj.remove()
    wait_for(lambda: not api.containers(all=True, filters={"label": f"com.docker.swarm.service.id={service.id}"}),
             30, message="service containers gone")
    volume.remove(force=True)


def url(op: Operation, ids: dict[str, str]) -> str:
    if "<" not in op.rule:
        return op.rule
    return op.rule.replace("<id>", ids[op.target]).replace("<name>", ids[op.target])


def versions(engine: docker.APIClient, ids: dict[str, str]) -> dict[str, Any]:
    return {"service": engine.inspect_service(ids["service"])["Version"]["Index"],
            "node": engine.inspect_node(ids["node"])["Version"]["Index"],
            "config": engine.inspect_config(ids["config"])["Version"]["Index"],
            "secret": engine.inspect_secret(ids["secret"])["Version"]["Index"],
            "swarm": engine.inspect_swarm()["Version"]["Index"],
            "task": engine.inspect_task(ids["task"])["Spec"],   # its version moves with its state
            "network": engine.inspect_network(ids["network"])["Id"],
            "volume": engine.inspect_volume(ids["volume"])["Name"]}


def send(app: Flask, op: Operation, ids: dict[str, str]) -> Any:
    headers = {"Content-Type": op.patch_types[0]} if op.patch_types else {}
    return app.test_client().open(url(op, ids), method=op.method, data=b"{}", headers=headers)


@pytest.mark.parametrize("name", sorted(name for name, op in OPERATIONS.items() if op.tier > Tier.READ))
def test_each_write_is_refused_below_its_tier(name: str, apps: dict[int, Flask], objects: dict[str, str],
                                              engine: docker.APIClient) -> None:
    op = OPERATIONS[name]
    before = versions(engine, objects)
    for level in range(int(op.tier)):
        response = send(apps[level], op, objects)
        assert response.status_code == 403, (level, response.get_json())
        problem = response.get_json()
        assert problem["code"] == "OPS001"
        assert problem["requiredLevel"] == int(op.tier) and problem["configuredLevel"] == level
    assert versions(engine, objects) == before


JSON_AND_MERGE = {"application/json-patch+json", "application/merge-patch+json"}
# A detail's Allow (docs/writes.md), written out (not derived from the table): a detail lists the writes of
# its whole family, method → lowest level. Tiers are the table's (node labels and task removal follow the
# agent tools: 2 and 1), and configs/secrets list PUT (their labels' PUT), not POST, which their family does
# not have.
DETAILS: dict[str, tuple[dict[str, int], set[str]]] = {
    "/services/<id>": ({"POST": 1, "PUT": 1, "PATCH": 2, "DELETE": 3}, JSON_AND_MERGE),
    "/nodes/<id>": ({"PUT": 2, "PATCH": 2, "DELETE": 3}, JSON_AND_MERGE),
    "/tasks/<id>": ({"DELETE": 1}, set()),
    "/configs/<id>": ({"PUT": 2, "PATCH": 2, "DELETE": 3}, JSON_AND_MERGE),
    "/secrets/<id>": ({"PUT": 2, "PATCH": 2, "DELETE": 3}, JSON_AND_MERGE),
    "/networks/<id>": ({"DELETE": 3}, set()),
    "/volumes/<name>": ({"DELETE": 3}, set()),
    "/stacks/<name>": ({"DELETE": 3}, set()),
}


def expected_allow(rule: str, level: int) -> tuple[list[str], set[str]]:
    order = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    if rule in DETAILS:
        minimum, patch_types = DETAILS[rule]
        methods = [m for m in order if m in ("GET", "HEAD") or minimum.get(m, 9) <= level]
        return methods, patch_types if "PATCH" in methods else set()
    on_rule = [op for op in OPERATIONS.values() if op.rule == rule and op.method != "GET"]
    allowed = [op for op in on_rule if op.tier <= level]
    methods = [m for m in order if m in ("GET", "HEAD") or any(op.method == m for op in allowed)]
    patch = next((set(op.patch_types) for op in allowed if op.method == "PATCH"), set())
    return methods, patch


RULES = sorted({op.rule for op in OPERATIONS.values() if op.method != "GET"})
# URLs that only take writes: a GET there is 405 (with Allow listing the routed methods).
WRITE_ONLY = {
    "/services/<id>/scale", "/services/<id>/image", "/services/<id>/rollback", "/services/<id>/restart",
    "/nodes/<id>/availability", "/swarm/orchestration", "/swarm/raft", "/swarm/dispatcher", "/swarm/ca",
    "/swarm/encryption", "/swarm/rotate-token", "/swarm/rotate-unlock-key", "/swarm/force-rotate-ca",
    "/swarm/unlock", "/plugins/<name>/upgrade", "/plugins/<name>/enable",
    "/plugins/<name>/disable", "/plugins/<name>/settings"}


@pytest.mark.parametrize("rule", RULES)
def test_allow_and_accept_patch_follow_the_level(rule: str, apps: dict[int, Flask], objects: dict[str, str]) -> None:
    op = next(op for op in OPERATIONS.values() if op.rule == rule)
    path = url(op, objects)
    first = apps[3].test_client().get(path)
    if rule in WRITE_ONLY:
        assert first.status_code == 405, (path, first.status_code)
        assert op.method in first.headers["Allow"]
        return
    if op.target == "plugin" and rule != "/plugins":
        assert first.status_code == 404 and first.get_json()["code"] == "PLG004"   # no plugin on the lab
        return
    assert first.status_code == 200, (path, first.status_code)
    for level, app in apps.items():
        response = app.test_client().get(path)
        assert response.status_code == 200
        methods, patch = expected_allow(rule, level)
        assert [m.strip() for m in response.headers["Allow"].split(",")] == methods, (level, path)
        got = {t.strip() for t in response.headers.get("Accept-Patch", "").split(",") if t.strip()}
        assert got == patch, (level, path)


def test_config_data_is_untouched(engine: docker.APIClient, objects: dict[str, str]) -> None:
    assert base64.b64decode(engine.inspect_config(objects["config"])["Spec"]["Data"]) == b"x"
