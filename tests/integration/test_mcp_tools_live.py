"""The 23 agent tools against gunicorn on the lab swarm, called through ``/mcp`` with the official MCP Python
SDK client (legacy mode: ``initialize``, 2025-11-25), every write checked with ``docker inspect``.

- Each operations level 0-3: ``tools/list`` shows exactly the tools of that tier and below; a tool one tier
  above is an ``isError`` result naming the level, and the engine object is unchanged.
- Level 0: ``get_logs`` (lines, cursor, ``since`` = cursor returns nothing old, ``level=error``) and ``search``.
- Level 1: scale, rollback, restart, image, remove_task; the history entry of a tool write names the agent
  (``via: mcp``, the tool).
- Level 2: env, labels, node labels, resources, placement, ports, update/rollback policy, log driver.
- Level 3: availability, role, the five removals; dry runs through a tool and through REST leave the engine
  object's ``Version.Index`` as it was and answer the diff.

- ACL (auth mode headers, a policy, a bearer token from the SDK's OAuth flow): the listing hides what the
  identity can never use, a write outside the grant is ACL002 and changes nothing, a write inside it is
  audited with the identity and the OAuth client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from app.mcp.tool_table import TOOLS
from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL
from tests.integration.mcp_waits import wait_cached

pytestmark = pytest.mark.integration
NAMES_BY_TIER = {tier: {t.name for t in TOOLS if t.tier <= tier} for tier in range(4)}
ABOVE = {0: ("scale_service", "replicas"), 1: ("update_service_env", "env"), 2: ("remove_service", None)}


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def servers(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], str]]:
    """``servers(level)``: the base URL of a gunicorn at that operations level (started once, on first use)."""
    started: dict[int, tuple[Any, Path, str]] = {}

    def at(level: int) -> str:
        if level not in started:
            tmp = tmp_path_factory.mktemp(f"gunicorn-mcp-tools-{level}")
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL=str(level),
                               SERVICE_DATA_DIR=str(tmp / "state"))
            log_path = tmp / "server.log"
            started[level] = (launch_gunicorn(env, log_path, base), log_path, base)
        return started[level][2]

    yield at
    for proc, log_path, _ in started.values():
        stop_gunicorn(proc, log_path)


def _service(dclient: docker.DockerClient, name: str, *, command: str = "sleep 1000000",
             **options: Any) -> Any:
    """A busybox service on the manager (the engine Shoal talks to), vip endpoint (ports can be published)."""
    labels = {TEST_LABEL: "1", **options.pop("labels", {})}
    return dclient.services.create(IMAGE, ["sh", "-c", command], name=name, labels=labels, init=True,
                                   stop_grace_period=1_000_000_000,
                                   mode=docker.types.ServiceMode("replicated", replicas=1),
                                   constraints=["node.role==manager"], **options)


@pytest.fixture
def service(dclient: docker.DockerClient) -> Iterator[str]:
    created = _service(dclient, f"t-mcp-tool-{uuid.uuid4().hex[:6]}")
    yield created.id
    with contextlib.suppress(docker.errors.NotFound):
        created.remove()


def _run(work: Callable[[Any], Awaitable[Any]], url: str) -> Any:
    from mcp.client import Client

    async def session() -> Any:
        async with Client(url, mode="legacy") as client:
            return await work(client)

    return asyncio.run(asyncio.wait_for(session(), 120))


def _call(url: str, name: str, arguments: dict[str, Any]) -> Any:
    async def work(client: Any) -> Any:
        return await client.call_tool(name, arguments)

    return _run(work, url)


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _version(engine: docker.APIClient, service_id: str) -> int:
    return int(engine.inspect_service(service_id)["Version"]["Index"])


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    structured: dict[str, Any] = result.structured_content
    return structured


# ---------------------------------------------------------------------------------------------- every level
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_listing_and_the_level_gate(level: int, servers: Callable[[int], str], service: str,
                                    engine: docker.APIClient) -> None:
    base = servers(level)
    wait_cached(base, f"/services/{service}")

    async def work(client: Any) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    assert _run(work, f"{base}/mcp") == NAMES_BY_TIER[level]
    if level in ABOVE:
        name, field = ABOVE[level]
        before = _version(engine, service)
        arguments: dict[str, Any] = {"id": service}
        if field == "replicas":
            arguments["replicas"] = 3
        elif field == "env":
            arguments["env"] = {"A": "1"}
        result = _call(f"{base}/mcp", name, arguments)
        assert result.is_error
        assert f"needs operations level {level + 1}" in _text(result) and f"agents' level is {level}" in _text(result)
        assert _version(engine, service) == before


# ---------------------------------------------------------------------------------------------- level 0
def test_get_logs_and_search(servers: Callable[[int], str], dclient: docker.DockerClient) -> None:
    base = servers(0)
    name = f"t-mcp-logs-{uuid.uuid4().hex[:6]}"
    created = _service(dclient, name, command="for i in 1 2 3; do echo plain line $i; done; "
                                              "echo 'level=error boom'; echo '[warn] careful'; sleep 1000000")
    url = f"{base}/mcp"
    try:
        def logged() -> dict[str, Any] | None:
            found = _ok(_call(url, "get_logs", {"service": name, "tail": 50}))
            return found if len(found["lines"]) >= 5 else None

        page = wait_for(logged, 30, interval=0.5, message="the service's five lines")
        assert isinstance(page, dict)
        messages = [line["message"] for line in page["lines"]]
        assert messages[:3] == ["plain line 1", "plain line 2", "plain line 3"], messages
        assert page["cursor"] and page["cursor"] > page["lines"][-1]["timestamp"]
        newer = _ok(_call(url, "get_logs", {"service": name, "since": page["cursor"]}))
        assert newer["lines"] == [] and newer["cursor"] == page["cursor"]
        errors = _ok(_call(url, "get_logs", {"service": created.id, "level": "error"}))
        assert [line["message"] for line in errors["lines"]] == ["level=error boom"]
        warnings = _ok(_call(url, "get_logs", {"service": name, "level": "warn", "tail": 0}))
        assert [line["message"] for line in warnings["lines"]] == ["level=error boom", "[warn] careful"]
        two = _ok(_call(url, "get_logs", {"service": name, "tail": 2}))
        assert [line["message"] for line in two["lines"]] == ["level=error boom", "[warn] careful"]
        found = _ok(_call(url, "search", {"query": name}))
        assert [hit["name"] for hit in found["results"]["services"]] == [name]
        assert found["query"] == name and found["limit"] == 3
        missing = _call(url, "get_logs", {"service": "no-such-service"})
        assert missing.is_error and "Not Found" in _text(missing)
        blank = _call(url, "search", {"query": " "})
        assert blank.is_error
    finally:
        created.remove()


# ---------------------------------------------------------------------------------------------- level 1
def test_operational_tools(servers: Callable[[int], str], service: str, engine: docker.APIClient,
                           dclient: docker.DockerClient) -> None:
    base = servers(1)
    wait_cached(base, f"/services/{service}")
    url = f"{base}/mcp"
    scaled = _ok(_call(url, "scale_service", {"id": service, "replicas": 2}))
    spec = engine.inspect_service(service)["Spec"]
    assert spec["Mode"]["Replicated"]["Replicas"] == 2
    assert scaled["ID"] == service and scaled["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
    assert "@id" not in scaled

    def audited() -> dict[str, Any] | None:
        items = requests.get(f"{base}/history", params={"type": "service", "resourceId": service},
                             headers={"Accept": "application/json"}, timeout=10).json()["items"]
        return next((item["audit"] for item in items if item["audit"] and item["action"] == "update"), None)

    audit = wait_for(audited, 15, interval=0.3, message="the audited history entry")
    assert isinstance(audit, dict)
    assert audit["identity"] == "anonymous" and audit["via"] == "mcp" and audit["tool"] == "scale_service"
    assert "client" not in audit   # auth mode none: no OAuth client

    _ok(_call(url, "rollback_service", {"id": service}))
    wait_for(lambda: engine.inspect_service(service)["Spec"]["Mode"]["Replicated"]["Replicas"] == 1, 15,
             message="the rollback to one replica")
    force = int(engine.inspect_service(service)["Spec"]["TaskTemplate"].get("ForceUpdate") or 0)
    _ok(_call(url, "restart_service", {"id": service}))
    assert int(engine.inspect_service(service)["Spec"]["TaskTemplate"]["ForceUpdate"]) == force + 1

    dclient.images.get(IMAGE).tag("local/busybox", "mcp-tools")
    try:
        _ok(_call(url, "update_service_image", {"id": service, "image": "local/busybox:mcp-tools"}))
        assert engine.inspect_service(service)["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] \
            == "local/busybox:mcp-tools"
        empty = _call(url, "update_service_image", {"id": service, "image": ""})
        assert empty.is_error and "arguments.image" in _text(empty)
    finally:
        wait_for(lambda: (engine.inspect_service(service).get("UpdateStatus") or {}).get("State")
                 in (None, "completed"), 60, interval=0.5, message="the image update to settle")

    def running_task() -> str | None:
        tasks = engine.tasks(filters={"service": service, "desired-state": "running"})
        ready = [t for t in tasks if t["Status"]["State"] == "running" and t["Status"].get("ContainerStatus")]
        return ready[0]["ID"] if ready else None

    task_id = wait_for(running_task, 60, interval=0.5, message="a running task")
    assert _ok(_call(url, "remove_task", {"id": task_id})) == {"removed": True}
    wait_for(lambda: engine.inspect_task(task_id)["Status"]["State"] != "running", 30,
             message="the removed task to stop")
    wait_for(lambda: running_task() not in (None, task_id), 60, interval=0.5, message="the replacement task")
    refused = _call(url, "update_node_labels", {"id": "mcpc-n1", "labels": {"a": "b"}})
    assert refused.is_error and "needs operations level 2" in _text(refused)
    dclient.images.remove("local/busybox:mcp-tools")


# ---------------------------------------------------------------------------------------------- level 2
def test_configuration_tools(servers: Callable[[int], str], service: str, engine: docker.APIClient) -> None:
    base = servers(2)
    wait_cached(base, f"/services/{service}")
    url = f"{base}/mcp"
    node_id = engine.info()["Swarm"]["NodeID"]
    hostname = engine.inspect_node(node_id)["Description"]["Hostname"]

    def spec() -> dict[str, Any]:
        found: dict[str, Any] = engine.inspect_service(service)["Spec"]
        return found

    _ok(_call(url, "update_service_env", {"id": service, "env": {"MODE": "x", "EMPTY": None}}))
    assert "MODE=x" in spec()["TaskTemplate"]["ContainerSpec"]["Env"]
    _ok(_call(url, "update_service_env", {"id": service, "env": {"MODE": None}}))
    assert "MODE=x" not in (spec()["TaskTemplate"]["ContainerSpec"].get("Env") or [])
    _ok(_call(url, "update_service_labels", {"id": service, "labels": {"team": "agents"}}))
    assert spec()["Labels"]["team"] == "agents" and spec()["Labels"][TEST_LABEL] == "1"
    _ok(_call(url, "update_service_resources", {"id": service, "resources": {
        "Limits": {"MemoryBytes": 64 * 1024 * 1024}, "Reservations": {"NanoCPUs": 10_000_000}}}))
    resources = spec()["TaskTemplate"]["Resources"]
    assert resources["Limits"]["MemoryBytes"] == 64 * 1024 * 1024 and resources["Reservations"]["NanoCPUs"] \
        == 10_000_000
    _ok(_call(url, "update_service_placement", {"id": service, "placement": {
        "Constraints": ["node.role==manager", f"node.hostname=={hostname}"]}}))
    assert f"node.hostname=={hostname}" in spec()["TaskTemplate"]["Placement"]["Constraints"]
    published = 20_000 + free_port() % 10_000
    _ok(_call(url, "update_service_ports", {"id": service, "ports": [
        {"Protocol": "tcp", "TargetPort": 80, "PublishedPort": published, "PublishMode": "ingress"}]}))
    assert spec()["EndpointSpec"]["Ports"][0]["PublishedPort"] == published
    _ok(_call(url, "update_service_update_policy", {"id": service, "policy": {
        "Parallelism": 2, "Delay": 1_000_000_000, "FailureAction": "continue", "Order": "start-first"}}))
    assert spec()["UpdateConfig"]["Parallelism"] == 2 and spec()["UpdateConfig"]["Order"] == "start-first"
    _ok(_call(url, "update_service_rollback_policy", {"id": service, "policy": {"Parallelism": 3,
                                                                                 "FailureAction": "pause"}}))
    assert spec()["RollbackConfig"]["Parallelism"] == 3
    _ok(_call(url, "update_service_log_driver", {"id": service, "driver": {"Name": "json-file",
                                                                           "Options": {"max-size": "5m"}}}))
    assert spec()["TaskTemplate"]["LogDriver"] == {"Name": "json-file", "Options": {"max-size": "5m"}}
    bad = _call(url, "update_service_ports", {"id": service, "ports": [{"TargetPort": 70000}]})
    assert bad.is_error and "arguments.ports[0].TargetPort" in _text(bad)

    label = f"mcp-{uuid.uuid4().hex[:6]}"
    try:
        node = _ok(_call(url, "update_node_labels", {"id": hostname, "labels": {label: "yes"}}))
        assert node["ID"] == node_id
        assert engine.inspect_node(node_id)["Spec"]["Labels"][label] == "yes"
    finally:
        _ok(_call(url, "update_node_labels", {"id": node_id, "labels": {label: None}}))
    assert label not in (engine.inspect_node(node_id)["Spec"].get("Labels") or {})


# ---------------------------------------------------------------------------------------------- level 3
def test_impactful_tools_and_dry_runs(servers: Callable[[int], str], service: str, engine: docker.APIClient,
                                      dclient: docker.DockerClient) -> None:
    base = servers(3)
    wait_cached(base, f"/services/{service}")
    url = f"{base}/mcp"
    node_id = engine.info()["Swarm"]["NodeID"]
    suffix = uuid.uuid4().hex[:6]

    # dry runs: a tool and REST, the engine object unchanged, the diff answered
    before = _version(engine, service)
    dry = _ok(_call(url, "update_service_env", {"id": service, "env": {"DRY": "1"}, "dryRun": True}))
    assert dry["dryRun"] is True and dry["changes"] == [
        {"field": 'Spec.TaskTemplate.ContainerSpec.Env["DRY"]', "new": "1"}]
    assert _ok(_call(url, "remove_service", {"id": service, "dryRun": True}))["removes"][0]["id"] == service
    rest = requests.put(f"{base}/services/{service}/scale", params={"dryRun": "true"}, json={"replicas": 4},
                        headers={"Accept": "application/json"}, timeout=10)
    assert rest.status_code == 200, rest.text
    assert rest.json()["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 1, "new": 4}]
    refused = requests.post(f"{base}/swarm/rotate-token", params={"dryRun": "true"}, json={"target": "worker"},
                            headers={"Accept": "application/json"}, timeout=10)
    assert refused.status_code == 400 and refused.json()["code"] == "API022"
    assert _version(engine, service) == before
    assert "DRY=1" not in (engine.inspect_service(service)["Spec"]["TaskTemplate"]["ContainerSpec"].get("Env") or [])

    # node availability and role (the lab's only manager stays one)
    try:
        node = _ok(_call(url, "update_node_availability", {"id": node_id, "availability": "pause"}))
        assert node["Spec"]["Availability"] == "pause"
        assert engine.inspect_node(node_id)["Spec"]["Availability"] == "pause"
    finally:
        _ok(_call(url, "update_node_availability", {"id": node_id, "availability": "active"}))
    assert engine.inspect_node(node_id)["Spec"]["Availability"] == "active"
    role = _ok(_call(url, "update_node_role", {"id": node_id, "role": "manager"}))
    assert role["Spec"]["Role"] == "manager" and engine.inspect_node(node_id)["Spec"]["Role"] == "manager"

    # removals
    config = dclient.configs.create(name=f"t-mcp-cfg-{suffix}", data=b"x", labels={TEST_LABEL: "1"})
    secret = dclient.secrets.create(name=f"t-mcp-sec-{suffix}", data=b"x", labels={TEST_LABEL: "1"})
    network = dclient.networks.create(f"t-mcp-net-{suffix}", driver="overlay", labels={TEST_LABEL: "1"})
    volume = dclient.volumes.create(f"t-mcp-vol-{suffix}", labels={TEST_LABEL: "1"})
    wait_for(lambda: requests.get(f"{base}/volumes/{volume.name}", timeout=5).status_code == 200, 15,
             message="the cache to hold the new objects")
    wait_for(lambda: requests.get(f"{base}/networks/{network.id}", timeout=5).status_code == 200, 15,
             message="the cache to hold the new network")
    assert _ok(_call(url, "remove_config", {"id": config.name})) == {"removed": True}
    assert _ok(_call(url, "remove_secret", {"id": secret.id})) == {"removed": True}
    assert _ok(_call(url, "remove_network", {"id": network.name})) == {"removed": True}
    assert _ok(_call(url, "remove_volume", {"name": volume.name, "force": False})) == {"removed": True}
    assert _ok(_call(url, "remove_service", {"id": service})) == {"removed": True}
    for gone in (lambda: engine.inspect_config(config.id), lambda: engine.inspect_secret(secret.id),
                 lambda: engine.inspect_network(network.id), lambda: engine.inspect_volume(volume.name),
                 lambda: engine.inspect_service(service)):
        with pytest.raises(docker.errors.NotFound):
            gone()
    again = _call(url, "remove_volume", {"name": volume.name})
    assert again.is_error and "(VOL002)" in _text(again)


# ---------------------------------------------------------------------------------------------- ACL, OAuth
def test_acl_through_a_bearer_token(docker_host: str, tmp_path_factory: pytest.TempPathFactory,
                                    dclient: docker.DockerClient, engine: docker.APIClient) -> None:
    """Auth mode headers with a policy: the agent gets a token for alice through the SDK's OAuth flow (the
    consent page played as in test_mcp_oauth_flow_live); alice may write services named t-mcp-acl-*. Her
    tool list has no node or config tools; a write on her service is applied and audited with her identity
    and the registered client; a write on another service is ACL002 and changes nothing."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.integration.test_mcp_oauth_flow_live import Browser, Server, Storage, _provider

    policy = {"grants": [{"resources": ["service:t-mcp-acl-*"], "audience": ["user:alice"],
                          "permissions": ["write"]}]}
    tmp = tmp_path_factory.mktemp("gunicorn-mcp-tools-acl")
    port = free_port()
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="3",
                       SERVICE_DATA_DIR=str(tmp / "state"), SERVICE_AUTH_MODE="headers",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1/32", SERVICE_AUTH_HEADERS_SUBJECT="X-Forwarded-User",
                       SERVICE_AUTH_HEADERS_GROUPS="X-Forwarded-Groups", SERVICE_ACL_POLICY=json.dumps(policy))
    server = Server(f"http://127.0.0.1:{port}", env, tmp / "server.log")
    suffix = uuid.uuid4().hex[:6]
    mine = _service(dclient, f"t-mcp-acl-{suffix}")
    other = _service(dclient, f"t-mcp-other-{suffix}")
    try:
        server.start()
        storage = Storage()
        provider = _provider(server, storage, Browser())

        async def session() -> tuple[set[str], Any, Any]:
            async with httpx2.AsyncClient(auth=provider, timeout=30) as http, \
                    Client(streamable_http_client(server.mcp, http_client=http), mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                allowed = await client.call_tool("scale_service", {"id": mine.name, "replicas": 2})
                denied = await client.call_tool("scale_service", {"id": other.id, "replicas": 2})
                return names, allowed, denied

        other_version = _version(engine, other.id)
        names, allowed, denied = asyncio.run(asyncio.wait_for(session(), 120))
        assert names == {t.name for t in TOOLS if "service" in t.acl_types} | {"search"}   # search: any grant
        assert _ok(allowed)["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
        assert engine.inspect_service(mine.id)["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
        assert denied.is_error
        assert _text(denied) == f"Write access denied: write access denied for service:{other.id} (ACL002)"
        assert _version(engine, other.id) == other_version

        client_id = storage.client_info.client_id

        def audited() -> dict[str, Any] | None:
            items = requests.get(f"{server.base}/history", params={"type": "service", "resourceId": mine.id},
                                 headers={"Accept": "application/json", "X-Forwarded-User": "alice"},
                                 timeout=10).json()["items"]
            return next((item["audit"] for item in items if item["audit"]), None)

        audit = wait_for(audited, 15, interval=0.3, message="alice's audited change")
        assert isinstance(audit, dict)
        assert audit["identity"] == "alice" and audit["via"] == "mcp" and audit["client"] == client_id
    finally:
        if server.proc is not None:
            server.stop()
        mine.remove()
        other.remove()


def test_the_lab_is_left_clean(dclient: docker.DockerClient) -> None:
    """No object of these tests is left behind (names start with t-mcp-)."""
    for listing in (dclient.services.list, dclient.configs.list, dclient.secrets.list):
        assert not [item.name for item in listing() if item.name.startswith("t-mcp-")]
