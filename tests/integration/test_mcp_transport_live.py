"""The agent endpoint's transport against gunicorn on the lab swarm, driven by the official MCP Python SDK
client (PyPI ``mcp``) in its three modes, plus the raw wire of the handshake revisions' GET stream.

- auto: the SDK probes ``server/discover``, adopts 2026-07-28 (no fallback) and connects well within 2 s
  (never its 10 s probe timeout); lists tools; opens a ``subscriptions/listen`` stream (acknowledged), and
  a listen stream on a service's URI gets ``ResourceUpdated`` after a real scale through ``scale_service``.
- legacy: ``initialize`` opens a session (2025-11-25), ``ping``, tool list; a resource subscription gets
  ``notifications/resources/updated`` through the GET stream after a real scale of the service.
- the 2026-07-28 pin: no probe; lists tools.
- raw: the GET stream opens (200 ``text/event-stream``, priming event), a second one is 409, a reconnect
  with ``Last-Event-ID`` is served, DELETE ends the session (then 404).
- SIGTERM with an open GET stream: the stream ends with a ``retry:`` hint and gunicorn stops promptly.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import sleeper
from tests.integration.mcp_waits import get_streams_open, wait_cached

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def _start(docker_host: str, tmp: Path, **extra: str) -> tuple[Any, Path, str]:
    port = free_port()
    log_path = tmp / "server.log"
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="1",
                       SERVICE_DATA_DIR=str(tmp / "state"), **extra)
    return launch_gunicorn(env, log_path, base), log_path, base


@pytest.fixture(scope="module")
def mcp_url(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, log_path, base = _start(docker_host, tmp_path_factory.mktemp("gunicorn-mcp-transport"))
    yield f"{base}/mcp"
    stop_gunicorn(proc, log_path)


@pytest.fixture
def service(dclient: docker.DockerClient) -> Iterator[str]:
    name = f"t-mcp-tr-{uuid.uuid4().hex[:6]}"
    created = sleeper(dclient, name, replicas=1)
    wait_for(lambda: any(s.name == name for s in dclient.services.list(filters={"name": name})), 10)
    yield name
    created.remove()


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def _tool_names(listing: Any) -> set[str]:
    return {tool.name for tool in listing.tools}


# ------------------------------------------------------------------------------------------ SDK modes
def test_auto_mode_adopts_discover_at_once_and_listens(mcp_url: str) -> None:
    from mcp.client import Client

    async def session() -> dict[str, Any]:
        began = time.monotonic()
        async with Client(mcp_url) as client:
            connected = time.monotonic() - began
            tools = await client.list_tools()
            async with client.listen(resources_list_changed=True, resource_subscriptions=["service://cluster"]) \
                    as subscription:
                honored = subscription.honored
            return {"connected": connected, "version": client.protocol_version, "tools": _tool_names(tools),
                    "honored": honored}

    result = _run(session())
    assert result["connected"] < 2.0, result
    assert result["version"] == "2026-07-28"
    assert {"search", "get_logs", "scale_service"} <= result["tools"]
    honored = result["honored"]
    assert honored.resources_list_changed is True
    assert list(honored.resource_subscriptions or []) == ["service://cluster"]
    assert not honored.tools_list_changed


def test_a_listen_stream_carries_the_update_of_a_real_scale(mcp_url: str, service: str,
                                                            engine: docker.APIClient) -> None:
    from mcp.client import Client
    from mcp.shared.subscriptions import ResourceUpdated

    service_id = engine.inspect_service(service)["ID"]
    uri = f"service://services/{service_id}"
    wait_cached(mcp_url.removesuffix("/mcp"), f"/services/{service_id}")

    async def session() -> list[Any]:
        async with Client(mcp_url) as client, client.listen(resource_subscriptions=[uri]) as subscription:
            scaled = await client.call_tool("scale_service", {"id": service_id, "replicas": 2})
            assert not scaled.is_error, scaled
            events = [await asyncio.wait_for(subscription.__anext__(), 15)]
            return events

    events = _run(session())
    assert events == [ResourceUpdated(uri=uri)]


def test_pinned_modern_mode_serves_without_a_probe(mcp_url: str) -> None:
    from mcp.client import Client

    async def session() -> tuple[str, set[str]]:
        async with Client(mcp_url, mode="2026-07-28") as client:
            return client.protocol_version, _tool_names(await client.list_tools())

    version, tools = _run(session())
    assert version == "2026-07-28" and "search" in tools


def test_legacy_mode_pings_lists_and_gets_a_notification_on_the_get_stream(
        mcp_url: str, service: str, engine: docker.APIClient) -> None:
    from mcp.client import Client
    from mcp.shared.exceptions import MCPDeprecationWarning

    service_id = engine.inspect_service(service)["ID"]
    wait_cached(mcp_url.removesuffix("/mcp"), f"/services/{service_id}")
    uri = f"service://services/{service_id}"
    received: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        params = getattr(root, "params", None)
        if method == "notifications/resources/updated" and str(getattr(params, "uri", "")) == uri:
            received.append(uri)

    async def session() -> tuple[str, set[str], float]:
        async with Client(mcp_url, mode="legacy", message_handler=on_message) as client:
            with warnings.catch_warnings():   # ping and resources/subscribe: deprecated as of 2026-07-28
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
                await client.subscribe_resource(uri)
            tools = _tool_names(await client.list_tools())
            await get_streams_open(mcp_url.removesuffix("/mcp"))   # the GET stream opens after initialized
            scaled = await client.call_tool("scale_service", {"id": service_id, "replicas": 2})
            assert not scaled.is_error, scaled
            began = time.monotonic()
            while not received and time.monotonic() - began < 15:
                await asyncio.sleep(0.1)
            return client.protocol_version, tools, time.monotonic() - began

    version, tools, waited = _run(session())
    assert version == "2025-11-25" and "scale_service" in tools
    assert received and set(received) == {uri}, f"no update within {waited:.1f} s"
    assert engine.inspect_service(service_id)["Spec"]["Mode"]["Replicated"]["Replicas"] == 2


# ------------------------------------------------------------------------------------------- raw wire
def _open_session(http: httpx.Client, url: str) -> str:
    answer = http.post(url, json=INIT, headers=ACCEPT)
    assert answer.status_code == 200, answer.text
    session_id = answer.headers["Mcp-Session-Id"]
    assert len(session_id) >= 16 and session_id.isascii() and session_id.isprintable()
    headers = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    note = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202 and note.content == b""
    return session_id


def _first_bytes(chunks: Iterator[bytes], want: bytes, limit: float = 5.0) -> bytes:
    seen = b""
    began = time.monotonic()
    for chunk in chunks:
        seen += chunk
        if want in seen or time.monotonic() - began > limit:
            break
    return seen


def test_get_stream_opens_resumes_refuses_a_second_and_delete_ends_the_session(mcp_url: str) -> None:
    with httpx.Client(timeout=10) as http:
        session_id = _open_session(http, mcp_url)
        headers = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        with http.stream("GET", mcp_url, headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            first = _first_bytes(stream.iter_raw(), b"\n\n")
            assert first.startswith(b"id: 0\nretry: ") and b"data: \n\n" in first   # the priming event
            second = http.get(mcp_url, headers=headers)
            assert second.status_code == 409 and second.json()["error"]["code"] == -32600
        resumed = None
        for _ in range(20):   # the server notices the first stream's client left within about a second
            with http.stream("GET", mcp_url, headers={**headers, "Last-Event-ID": "0"}) as again:
                if again.status_code == 200:
                    resumed = _first_bytes(again.iter_raw(), b"\n\n")
                    break
                assert again.status_code == 409
            time.sleep(0.25)
        assert resumed is not None and resumed.startswith(b"id: 0\n")
        assert http.delete(mcp_url, headers=headers).status_code == 204
        gone = http.post(mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32600


def test_sigterm_ends_an_open_get_stream_with_a_retry_hint(docker_host: str, tmp_path: Path) -> None:
    proc, log_path, base = _start(docker_host, tmp_path)
    try:
        with httpx.Client(timeout=10) as http:
            session_id = _open_session(http, f"{base}/mcp")
            headers = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
            with http.stream("GET", f"{base}/mcp", headers=headers) as stream:
                chunks = stream.iter_raw()
                assert _first_bytes(chunks, b"\n\n").startswith(b"id: 0\n")
                began = time.monotonic()
                proc.terminate()
                rest = b"".join(chunks)
                ended = time.monotonic() - began
        assert rest.endswith(b"retry: 3000\n\n") and ended < 5, (rest, ended)
        assert proc.wait(timeout=20) == 0
    finally:
        stop_gunicorn(proc, log_path) if proc.poll() is None else None
    assert "Traceback" not in log_path.read_text()
