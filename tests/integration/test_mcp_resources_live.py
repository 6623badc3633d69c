"""The agent resources against gunicorn on the lab swarm, driven by the official MCP Python SDK client (PyPI
``mcp``) in legacy mode (a handshake session with its GET stream):

- list the static resources and the nine templates; read the cluster, history and recommendations, the demo
  stack and every kind of its members (service, task, config, secret, network, volume) and a node: the body
  is the REST detail's, the secret has no data, the config carries the engine's base64 data, the task names
  its service and node; a name reads as the id; a missing object is the not-found error; the ticker's logs
  URI gives its last lines and a cursor;
- complete a service name of the demo stack;
- subscribe to a service and get ``notifications/resources/updated`` within 1 s of a scale through REST;
  ``list_changed`` after a config create through REST; a logs URI subscription notified when the ticker logs.
"""

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

from app.logs.timestamps import parse_rfc3339
from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import sleeper
from tests.integration.mcp_waits import get_streams_open, wait_cached

UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"


@pytest.fixture(scope="module")
def base(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("gunicorn-mcp-resources")
    port = free_port()
    log_path = tmp / "server.log"
    url = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="2",
                       SERVICE_DATA_DIR=str(tmp / "state"))
    proc = launch_gunicorn(env, log_path, url)
    yield url
    stop_gunicorn(proc, log_path)


@pytest.fixture
def service(dclient: docker.DockerClient) -> Iterator[Any]:
    name = f"t-mcp-res-{uuid.uuid4().hex[:6]}"
    created = sleeper(dclient, name, replicas=1)
    wait_for(lambda: any(s.name == name for s in dclient.services.list(filters={"name": name})), 10)
    yield created
    created.remove()


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 90))


class Inbox:
    """Server notifications as the SDK's message handler delivers them, with their arrival time."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, str]] = []

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if isinstance(method, str):
            params = getattr(root, "params", None)
            self.seen.append((time.monotonic(), method, str(getattr(params, "uri", "") or "")))

    def first(self, method: str, uri: str = "", after: float = 0.0) -> float | None:
        return next((at for at, m, u in self.seen if m == method and u == uri and at >= after), None)

    async def wait(self, method: str, uri: str = "", after: float = 0.0, timeout: float = 10.0) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.first(method, uri, after)
            if found is not None:
                return found
            await asyncio.sleep(0.02)
        return None


def text_of(result: Any) -> Any:
    (content,) = result.contents
    assert content.mime_type == "application/json"
    return json.loads(content.text)


def quiet() -> Any:
    from mcp.shared.exceptions import MCPDeprecationWarning
    manager = warnings.catch_warnings()
    manager.__enter__()
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    return manager


def test_lists_and_reads_every_kind_of_the_demo_stack(base: str, engine: docker.APIClient) -> None:
    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    rest = httpx.Client(base_url=base, headers={"Accept": "application/json"}, timeout=10)

    async def session() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with Client(f"{base}/mcp", mode="legacy") as client:
            found["version"] = client.protocol_version
            found["resources"] = sorted(str(r.uri) for r in (await client.list_resources()).resources)
            found["templates"] = sorted(t.uri_template for t in
                                        (await client.list_resource_templates()).resource_templates)
            for static in ("cluster", "history", "recommendations"):
                found[static] = text_of(await client.read_resource(f"service://{static}"))
            stack = text_of(await client.read_resource("service://stacks/demo"))
            found["stack"] = stack
            members = stack["stack"]
            reads: dict[str, Any] = {}
            for plural in ("services", "configs", "secrets", "networks", "volumes"):
                item = members[plural][0]
                object_id = item.get("ID") or item.get("Id") or item["Name"]
                reads[plural] = (object_id, text_of(await client.read_resource(f"service://{plural}/{object_id}")))
            web = next(s for s in members["services"] if s["Spec"]["Name"] == "demo_web")
            web_detail = text_of(await client.read_resource(f"service://services/{web['ID']}"))
            task_id = web_detail["tasks"][0]["id"]
            reads["tasks"] = (task_id, text_of(await client.read_resource(f"service://tasks/{task_id}")))
            node_id = reads["tasks"][1]["task"]["NodeID"]
            reads["nodes"] = (node_id, text_of(await client.read_resource(f"service://nodes/{node_id}")))
            found["by_name"] = text_of(await client.read_resource("service://services/demo_web"))
            found["web"] = web_detail
            found["reads"] = reads
            ticker = next(s for s in members["services"] if s["Spec"]["Name"] == "demo_ticker")
            found["ticker_logs"] = text_of(await client.read_resource(f"service://services/{ticker['ID']}/logs"))
            try:
                await client.read_resource("service://services/no-such-service")
                found["missing"] = None
            except MCPError as exc:
                found["missing"] = exc.error.code
        return found

    found = run(session())
    assert found["version"] == "2025-11-25"
    assert found["resources"] == ["service://cluster", "service://history", "service://recommendations"]
    assert len(found["templates"]) == 9 and "service://services/{id}/logs" in found["templates"]
    assert found["cluster"]["@type"] == "Cluster" and found["cluster"]["serviceCount"] >= 3
    assert found["history"]["@id"] == "/history" and len(found["history"]["items"]) <= 100
    assert found["recommendations"]["@type"] == "RecommendationCollection"
    assert {s["Spec"]["Name"] for s in found["stack"]["stack"]["services"]} >= {"demo_web", "demo_api", "demo_ticker"}
    reads = found["reads"]
    for plural, (object_id, body) in reads.items():
        assert body["@id"] == f"/{plural}/{object_id}", plural
    config_id, config = reads["configs"]
    assert config == rest.get(f"/configs/{config_id}").json()         # the REST body, exactly
    assert config["config"]["Spec"]["Data"] == engine.inspect_config(config_id)["Spec"]["Data"]
    secret_id, secret = reads["secrets"]
    assert "Data" not in secret["secret"]["Spec"] and secret == rest.get(f"/secrets/{secret_id}").json()
    network_id, network = reads["networks"]
    assert network == rest.get(f"/networks/{network_id}").json()
    volume_name, volume = reads["volumes"]
    assert volume == rest.get(f"/volumes/{volume_name}").json()
    task = reads["tasks"][1]["task"]
    assert task["ServiceName"] == "demo_web" and task["NodeHostname"]
    assert reads["nodes"][1]["node"]["Description"]["Hostname"] == task["NodeHostname"]
    assert found["by_name"]["@id"] == found["web"]["@id"]
    logs = found["ticker_logs"]
    assert set(logs) == {"lines", "cursor"} and 0 < len(logs["lines"]) <= 100
    assert any("tick" in line["message"] or "warn" in line["message"] for line in logs["lines"])
    newest = max(parse_rfc3339(line["timestamp"]) for line in logs["lines"])
    assert parse_rfc3339(logs["cursor"]) == newest + 1      # the last line + 1 ns, as get_logs gives it
    assert found["missing"] == -32002


def test_completion_offers_the_demo_service_names(base: str) -> None:
    from mcp.client import Client
    from mcp_types import ResourceTemplateReference

    async def session() -> Any:
        async with Client(f"{base}/mcp", mode="legacy") as client:
            ref = ResourceTemplateReference(type="ref/resource", uri="service://services/{id}")
            return (await client.complete(ref, {"name": "id", "value": "demo_t"})).completion

    completion = run(session())
    assert completion.values == ["demo_ticker"] and completion.total == 1 and not completion.has_more


def test_subscriptions_get_updated_list_changed_and_log_notifications(base: str, service: Any,
                                                                      dclient: docker.DockerClient) -> None:
    from mcp.client import Client

    inbox = Inbox()
    uri = f"service://services/{service.id}"
    wait_cached(base, f"/services/{service.id}")
    config_name = f"t-mcp-res-{uuid.uuid4().hex[:6]}"
    ticker_id = dclient.services.get("demo_ticker").id
    logs_uri = f"service://services/{ticker_id}/logs"

    async def session() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with Client(f"{base}/mcp", mode="legacy", message_handler=inbox) as client, \
                httpx.AsyncClient(base_url=base, timeout=15) as rest:
            manager = quiet()
            try:
                await client.subscribe_resource(f"service://services/{service.name}")   # by name
                await client.subscribe_resource(logs_uri)
            finally:
                manager.__exit__(None, None, None)
            await get_streams_open(base)   # the SDK opens its GET stream after notifications/initialized
            found["logs"] = await inbox.wait(UPDATED, logs_uri, timeout=8)
            began = time.monotonic()
            scaled = await rest.put(f"/services/{service.id}/scale", json={"replicas": 2})
            found["scale_status"] = scaled.status_code
            at = await inbox.wait(UPDATED, uri, after=began, timeout=5)
            found["updated_after"] = None if at is None else at - began
            began = time.monotonic()
            created = await rest.post("/configs", json={"name": config_name,
                                                        "data": base64.b64encode(b"x=1\n").decode()})
            found["create_status"] = created.status_code
            at = await inbox.wait(LIST_CHANGED, after=began, timeout=5)
            found["listed_after"] = None if at is None else at - began
        return found

    try:
        found = run(session())
    finally:
        for config in dclient.configs.list(filters={"name": config_name}):
            config.remove()
    assert found["scale_status"] == 200 and found["create_status"] == 201, found
    assert found["updated_after"] is not None and found["updated_after"] <= 1.0, found
    assert found["listed_after"] is not None and found["listed_after"] <= 1.0, found
    assert found["logs"] is not None, f"no logs notification: {inbox.seen[:20]}"
    assert dclient.services.get(service.id).attrs["Spec"]["Mode"]["Replicated"]["Replicas"] == 2


def test_a_read_costs_about_what_the_rest_read_costs(base: str, dclient: docker.DockerClient) -> None:
    """The same service detail over HTTP, 60 times each, interleaved: the JSON-RPC read's lower quartile is
    within 2 ms of the REST GET's (the body is built by the same code; the difference is the transport). The
    quartile, not the median: other work on the test machine shifts single wall-clock samples by more."""
    service_id = dclient.services.get("demo_web").id
    accept = {"Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    with httpx.Client(base_url=base, timeout=10) as http:
        session_id = http.post("/mcp", json=init, headers=accept).headers["Mcp-Session-Id"]
        headers = {**accept, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                "params": {"uri": f"service://services/{service_id}"}}
        mcp_times: list[float] = []
        rest_times: list[float] = []
        for index in range(70):
            began = time.perf_counter()
            answer = http.post("/mcp", json=read, headers=headers)
            mcp_elapsed = time.perf_counter() - began
            began = time.perf_counter()
            rest = http.get(f"/services/{service_id}", headers={"Accept": "application/json"})
            rest_elapsed = time.perf_counter() - began
            assert answer.status_code == 200 and rest.status_code == 200
            if index >= 10:   # warm-up
                mcp_times.append(mcp_elapsed)
                rest_times.append(rest_elapsed)
        text = answer.json()["result"]["contents"][0]["text"]
        assert json.loads(text)["service"]["ID"] == service_id
    mcp_quartile, rest_quartile = sorted(mcp_times)[15], sorted(rest_times)[15]
    assert mcp_quartile <= rest_quartile + 0.002, (mcp_quartile, rest_quartile)


def test_a_modern_listen_stream_gets_updated_and_list_changed(base: str, service: Any,
                                                              dclient: docker.DockerClient) -> None:
    """The 2026-07-28 revision (auto mode): reads work stateless, and a ``subscriptions/listen`` stream that
    names the service (by name) gets ``ResourceUpdated`` within 1 s of a REST scale and
    ``ResourcesListChanged`` after a REST config create."""
    from mcp.client import Client
    from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

    name_uri = f"service://services/{service.name}"
    wait_cached(base, f"/services/{service.id}")
    config_name = f"t-mcp-res-{uuid.uuid4().hex[:6]}"

    async def session() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with Client(f"{base}/mcp") as client, httpx.AsyncClient(base_url=base, timeout=15) as rest:
            found["version"] = client.protocol_version
            found["read"] = text_of(await client.read_resource(name_uri))["service"]["ID"]
            async with client.listen(resources_list_changed=True, resource_subscriptions=[name_uri]) as events:
                seen: list[tuple[float, Any]] = []

                async def collect() -> None:
                    async for event in events:
                        seen.append((time.monotonic(), event))

                collector = asyncio.create_task(collect())
                await asyncio.sleep(0.3)
                began = time.monotonic()
                found["scale"] = (await rest.put(f"/services/{service.id}/scale", json={"replicas": 2})).status_code
                found["create"] = (await rest.post("/configs", json={
                    "name": config_name, "data": base64.b64encode(b"y=2\n").decode()})).status_code
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and not (
                        any(isinstance(e, ResourceUpdated) and e.uri == name_uri for _, e in seen)
                        and any(isinstance(e, ResourcesListChanged) for _, e in seen)):
                    await asyncio.sleep(0.02)
                collector.cancel()
                updated = [at for at, e in seen if isinstance(e, ResourceUpdated) and e.uri == name_uri]
                listed = [at for at, e in seen if isinstance(e, ResourcesListChanged)]
                found["updated_after"] = updated[0] - began if updated else None
                found["listed"] = bool(listed)
        return found

    try:
        found = run(session())
    finally:
        for config in dclient.configs.list(filters={"name": config_name}):
            config.remove()
    assert found["version"] == "2026-07-28" and found["read"] == service.id
    assert found["scale"] == 200 and found["create"] == 201, found
    assert found["updated_after"] is not None and found["updated_after"] <= 1.0, found
    assert found["listed"], found
