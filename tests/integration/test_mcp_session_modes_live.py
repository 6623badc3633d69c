"""One full agent session in each mode of the official Python SDK client (auto → 2026-07-28, legacy handshake,
pinned 2026-07-28) against gunicorn on the lab swarm: list and read every resource kind, complete a template
argument, call a tool of each tier (level 3; the dry run leaves the node as it was), get ``updated`` within
1 s of a scale, ``list_changed`` on a create, and a logs-URI notification from the lab's ticker."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import sleeper
from tests.integration.mcp_waits import get_streams_open, wait_cached

KINDS = ("services", "configs", "secrets", "networks", "volumes")


@pytest.fixture(scope="module")
def base(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("gunicorn-mcp-modes")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="3",
                       SERVICE_DATA_DIR=str(tmp / "state"))
    proc = launch_gunicorn(env, tmp / "server.log", url)
    yield url
    stop_gunicorn(proc, tmp / "server.log")


@pytest.fixture
def service(dclient: docker.DockerClient) -> Iterator[Any]:
    name = f"t-mcp-modes-{uuid.uuid4().hex[:6]}"
    created = sleeper(dclient, name, replicas=1)
    wait_for(lambda: any(s.name == name for s in dclient.services.list(filters={"name": name})), 10)
    yield created
    created.remove()


def text_of(result: Any) -> Any:
    return json.loads(result.contents[0].text)


def tool_json(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def reads_and_tools(client: Any, service: Any, node_id: str, doomed: str) -> dict[str, Any]:
    """What every mode must do alike: lists, reads of every kind, completion, a tool per tier."""
    from mcp_types import ResourceTemplateReference

    found: dict[str, Any] = {"version": client.protocol_version}
    found["resources"] = sorted(str(r.uri) for r in (await client.list_resources()).resources)
    found["templates"] = len((await client.list_resource_templates()).resource_templates)
    for static in ("cluster", "history", "recommendations"):
        found[static] = text_of(await client.read_resource(f"service://{static}"))
    members = text_of(await client.read_resource("service://stacks/demo"))["stack"]
    reads = {}
    for plural in KINDS:
        item = members[plural][0]
        object_id = item.get("ID") or item.get("Id") or item["Name"]
        reads[plural] = text_of(await client.read_resource(f"service://{plural}/{object_id}"))
    web = text_of(await client.read_resource("service://services/demo_web"))
    reads["tasks"] = text_of(await client.read_resource(f"service://tasks/{web['tasks'][0]['id']}"))
    reads["nodes"] = text_of(await client.read_resource(f"service://nodes/{node_id}"))
    found["reads"] = reads
    ref = ResourceTemplateReference(type="ref/resource", uri="service://services/{id}")
    found["completion"] = (await client.complete(ref, {"name": "id", "value": "demo_t"})).completion.values
    found["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
    found["search"] = tool_json(await client.call_tool("search", {"query": "demo_web"}))
    found["logs"] = tool_json(await client.call_tool("get_logs", {"service": "demo_ticker", "tail": 5}))
    found["labels"] = tool_json(await client.call_tool(
        "update_service_labels", {"id": service.id, "labels": {"shoal.test.mode": "yes"}}))
    found["drain_dry_run"] = tool_json(await client.call_tool(
        "update_node_availability", {"id": node_id, "availability": "drain", "dryRun": True}))
    found["removed"] = tool_json(await client.call_tool("remove_config", {"id": doomed}))
    return found


def check_common(found: dict[str, Any], service: Any, engine: docker.APIClient, node_id: str) -> None:
    assert found["resources"] == ["service://cluster", "service://history", "service://recommendations"]
    assert found["templates"] == 9
    assert found["cluster"] and isinstance(found["history"], dict)
    reads = found["reads"]
    assert {"service", "config", "secret", "network", "volume"} <= {
        key for body in reads.values() for key in body}
    assert "Data" not in reads["secrets"]["secret"]["Spec"]
    assert reads["tasks"]["task"]["ServiceName"] == "demo_web" and reads["tasks"]["task"]["NodeHostname"]
    assert reads["nodes"]["node"]["ID"] == node_id
    assert found["completion"] == ["demo_ticker"]
    assert {"search", "get_logs", "scale_service", "update_service_labels", "update_node_availability",
            "remove_config"} <= set(found["tools"])
    assert set(found["logs"]) == {"lines", "cursor"} and found["logs"]["lines"]
    assert engine.inspect_service(service.id)["Spec"]["Labels"]["shoal.test.mode"] == "yes"
    assert found["drain_dry_run"]["dryRun"] is True
    assert engine.inspect_node(node_id)["Spec"]["Availability"] == "active"   # the dry run wrote nothing
    assert found["removed"] == {"removed": True}


def make_config(dclient: docker.DockerClient, prefix: str) -> str:
    return str(dclient.configs.create(name=f"{prefix}-{uuid.uuid4().hex[:6]}", data=b"x=1\n",
                                      labels={"shoal.test": "1"}).id)


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
def test_a_modern_session_does_everything(base: str, service: Any, mode: str, engine: docker.APIClient,
                                          dclient: docker.DockerClient) -> None:
    from mcp.client import Client
    from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

    node_id = engine.nodes()[0]["ID"]
    wait_cached(base, f"/services/{service.id}")
    doomed = make_config(dclient, "t-mcp-modes-doomed")
    created_name = f"t-mcp-modes-new-{uuid.uuid4().hex[:6]}"
    uri = f"service://services/{service.id}"
    logs_uri = f"service://services/{dclient.services.get('demo_ticker').id}/logs"
    kwargs: dict[str, Any] = {} if mode == "auto" else {"mode": mode}

    async def session() -> dict[str, Any]:
        async with Client(f"{base}/mcp", **kwargs) as client, httpx.AsyncClient(base_url=base, timeout=15) as rest:
            found = await reads_and_tools(client, service, node_id, doomed)
            async with client.listen(resources_list_changed=True, resource_subscriptions=[uri, logs_uri]) as events:
                seen: list[tuple[float, Any]] = []

                async def collect() -> None:
                    async for event in events:
                        seen.append((time.monotonic(), event))

                collector = asyncio.create_task(collect())
                began = time.monotonic()
                found["scale"] = tool_json(await client.call_tool("scale_service", {"id": service.id, "replicas": 2}))
                found["create"] = (await rest.post("/configs", json={
                    "name": created_name, "data": base64.b64encode(b"y=2\n").decode()})).status_code
                deadline = time.monotonic() + 8
                while time.monotonic() < deadline and not (
                        any(isinstance(e, ResourceUpdated) and e.uri == uri for _, e in seen)
                        and any(isinstance(e, ResourcesListChanged) for _, e in seen)
                        and any(isinstance(e, ResourceUpdated) and e.uri == logs_uri for _, e in seen)):
                    await asyncio.sleep(0.02)   # poll interval of a bounded wait
                collector.cancel()
                updated = [at for at, e in seen if isinstance(e, ResourceUpdated) and e.uri == uri]
                found["updated_after"] = updated[0] - began if updated else None
                found["listed"] = any(isinstance(e, ResourcesListChanged) for _, e in seen)
                found["log_lines"] = any(isinstance(e, ResourceUpdated) and e.uri == logs_uri for _, e in seen)
        return found

    try:
        found = asyncio.run(asyncio.wait_for(session(), 120))
    finally:
        for config in dclient.configs.list(filters={"name": created_name}):
            config.remove()
    assert found["version"] == "2026-07-28"
    check_common(found, service, engine, node_id)
    assert engine.inspect_service(service.id)["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
    assert found["create"] == 201 and found["listed"], found
    assert found["updated_after"] is not None and found["updated_after"] <= 1.0, found
    assert found["log_lines"], found


def test_a_legacy_session_does_everything(base: str, service: Any, engine: docker.APIClient,
                                          dclient: docker.DockerClient) -> None:
    from mcp.client import Client
    from mcp.shared.exceptions import MCPDeprecationWarning

    node_id = engine.nodes()[0]["ID"]
    wait_cached(base, f"/services/{service.id}")
    doomed = make_config(dclient, "t-mcp-modes-doomed")
    created_name = f"t-mcp-modes-new-{uuid.uuid4().hex[:6]}"
    uri = f"service://services/{service.id}"
    logs_uri = f"service://services/{dclient.services.get('demo_ticker').id}/logs"
    seen: list[tuple[float, str, str]] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        params = getattr(root, "params", None)
        if isinstance(method, str):
            seen.append((time.monotonic(), method, str(getattr(params, "uri", ""))))

    async def session() -> dict[str, Any]:
        async with Client(f"{base}/mcp", mode="legacy", message_handler=on_message) as client, \
                httpx.AsyncClient(base_url=base, timeout=15) as rest:
            found = await reads_and_tools(client, service, node_id, doomed)
            with warnings.catch_warnings():   # resources/subscribe: deprecated as of 2026-07-28
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)
                await client.subscribe_resource(logs_uri)
            await get_streams_open(base)
            began = time.monotonic()
            found["scale"] = tool_json(await client.call_tool("scale_service", {"id": service.id, "replicas": 2}))
            found["create"] = (await rest.post("/configs", json={
                "name": created_name, "data": base64.b64encode(b"y=2\n").decode()})).status_code

            def has(method: str, wanted: str | None = None) -> bool:
                return any(m == method and (wanted is None or u == wanted) for _, m, u in seen)

            deadline = time.monotonic() + 8
            while time.monotonic() < deadline and not (
                    has("notifications/resources/updated", uri) and has("notifications/resources/list_changed")
                    and has("notifications/resources/updated", logs_uri)):
                await asyncio.sleep(0.02)   # poll interval of a bounded wait
            updated = [at for at, m, u in seen if m == "notifications/resources/updated" and u == uri]
            found["updated_after"] = updated[0] - began if updated else None
            found["listed"] = has("notifications/resources/list_changed")
            found["log_lines"] = has("notifications/resources/updated", logs_uri)
        return found

    try:
        found = asyncio.run(asyncio.wait_for(session(), 120))
    finally:
        for config in dclient.configs.list(filters={"name": created_name}):
            config.remove()
    assert found["version"] == "2025-11-25"
    check_common(found, service, engine, node_id)
    assert found["create"] == 201 and found["listed"], found
    assert found["updated_after"] is not None and found["updated_after"] <= 1.0, found
    assert found["log_lines"], found
