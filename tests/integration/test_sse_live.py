"""Change streams through the real server (gunicorn + gevent worker on 127.0.0.1, following the lab swarm)
with an independent SSE client (httpx + httpx-sse): the events of real engine changes within 1 s, stack
streams, ``types=``, reconnect with Last-Event-ID, sync for a bogus id, the 256-stream cap."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import gevent
import httpx
import pytest
import requests
from httpx_sse import connect_sse

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, wait_for
from tests.integration.engine_state import TEST_LABEL, sleeper

pytestmark = pytest.mark.integration
DELIVERY = 1.0          # seconds from an engine change to its event (the target bound)
ENGINE_SLACK = 0.0      # the bound is measured from the engine call returning: nothing added


def start_server(docker_host: str, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """gunicorn on 127.0.0.1 with keepalive 1 s, so dead clients are found fast and the cap test stays short."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_LOG_LEVEL="warn", SERVICE_SSE_KEEPALIVE="1s",
                       SERVICE_DATA_DIR=str(log_path.parent / "state"))
    return launch_gunicorn(env, log_path, base), base


@pytest.fixture(scope="module")
def sse_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("gunicorn-sse") / "server.log"
    proc, base = start_server(docker_host, log_path)
    try:
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert "Traceback" not in log_path.read_text(), log_path.read_text()[-4000:]


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@dataclass
class Received:
    id: str
    event: str
    data: Any
    at: float

    def items(self) -> list[dict[str, Any]]:
        return self.data if self.event == "batch" else [self.data]


@dataclass
class LiveStream:
    """An SSE connection read by its own greenlet into ``events``."""

    base: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    events: list[Received] = field(default_factory=list)
    status: int | None = None
    response_headers: httpx.Headers | None = None

    def __post_init__(self) -> None:
        self._http = httpx.Client(base_url=self.base, timeout=httpx.Timeout(10, read=30))
        self._reader = gevent.spawn(self._read)
        wait_for(lambda: self.status is not None, 5, message=f"stream {self.path} opened")

    def _read(self) -> None:
        with connect_sse(self._http, "GET", self.path, headers=self.headers) as source:
            self.status = source.response.status_code
            self.response_headers = source.response.headers
            if self.status != 200:
                return
            for sse in source.iter_sse():
                if not sse.data:      # httpx-sse also yields the bare "retry:" block, which carries no event
                    continue
                self.events.append(Received(sse.id, sse.event, json.loads(sse.data), time.monotonic()))

    def items(self) -> list[tuple[dict[str, Any], Received]]:
        return [(item, received) for received in list(self.events) for item in received.items()]

    def wait_item(self, since: float, timeout: float, **match: str) -> tuple[dict[str, Any], Received]:
        def found() -> tuple[dict[str, Any], Received] | None:
            for item, received in self.items():
                if received.at >= since and all(item.get(k) == v for k, v in match.items()):
                    return item, received
            return None

        result = wait_for(found, timeout, interval=0.02, message=f"{match} on {self.path}")
        assert isinstance(result, tuple)
        return result

    def last_id(self) -> str:
        return self.events[-1].id

    def close(self) -> None:
        self._reader.kill(block=True, timeout=5)
        self._http.close()


@pytest.fixture
def streams(sse_server: str) -> Iterator[list[LiveStream]]:
    opened: list[LiveStream] = []
    yield opened
    for stream in opened:
        stream.close()


def open_stream(streams: list[LiveStream], base: str, path: str, **headers: str) -> LiveStream:
    stream = LiveStream(base, path, {"Accept": "text/event-stream", **headers})
    streams.append(stream)
    assert stream.status == 200, path
    return stream


def unique(prefix: str) -> str:
    return f"shoal-sse-{prefix}-{uuid.uuid4().hex[:8]}"


def assert_within(item: tuple[dict[str, Any], Received], started: float, bound: float) -> dict[str, Any]:
    data, received = item
    assert received.at - started <= bound, f"{data['type']} {data['action']} after {received.at - started:.2f}s"
    return data


# --------------------------------------------------------------------------- tests
def test_stream_headers(sse_server: str, streams: list[LiveStream]) -> None:
    stream = open_stream(streams, sse_server, "/events")
    headers = stream.response_headers
    assert headers is not None
    assert headers["content-type"] == "text/event-stream" and headers["x-accel-buffering"] == "no"
    assert "cache-control" not in headers and "etag" not in headers


def test_service_create_update_remove(sse_server: str, streams: list[LiveStream], dclient: Any) -> None:
    stream = open_stream(streams, sse_server, "/services")
    everything = open_stream(streams, sse_server, "/events")
    started = time.monotonic()
    service = sleeper(dclient, unique("svc"), replicas=0)
    try:
        created = assert_within(stream.wait_item(started, 5, action="create", id=service.id), started,
                                DELIVERY + ENGINE_SLACK)
        assert created["@type"] == "Service" and created["resource"]["ID"] == service.id
        assert created["@id"] == f"/services/{service.id}" and "RunningTasks" in created["resource"]
        detail = open_stream(streams, sse_server, f"/services/{service.id}")
        started = time.monotonic()
        service.scale(2)
        updated = assert_within(detail.wait_item(started, 5, action="update", id=service.id), started,
                                DELIVERY + ENGINE_SLACK)
        assert updated["resource"]["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
        everything.wait_item(started, 5, action="update", id=service.id)
    finally:
        started = time.monotonic()
        service.remove()
    removed = assert_within(stream.wait_item(started, 5, action="remove", id=service.id), started,
                            DELIVERY + ENGINE_SLACK)
    assert removed["resource"]["ID"] == service.id        # the last known state


@pytest.mark.parametrize("kind", ["config", "secret"])
def test_config_and_secret_create_and_remove(sse_server: str, streams: list[LiveStream], dclient: Any,
                                             kind: str) -> None:
    stream = open_stream(streams, sse_server, f"/{kind}s")
    collection = dclient.configs if kind == "config" else dclient.secrets
    started = time.monotonic()
    created_object = collection.create(name=unique(kind), data=b"top-secret-payload", labels={TEST_LABEL: "1"})
    try:
        created = assert_within(stream.wait_item(started, 5, action="create", id=created_object.id), started,
                                DELIVERY + ENGINE_SLACK)
        assert created["type"] == kind
        if kind == "secret":
            assert "Data" not in created["resource"]["Spec"]
    finally:
        started = time.monotonic()
        created_object.remove()
    assert_within(stream.wait_item(started, 5, action="remove", id=created_object.id), started,
                  DELIVERY + ENGINE_SLACK)
    assert all("dG9wLXNlY3JldC" not in json.dumps(item) for item, _ in stream.items()) or kind == "config"


def test_network_and_volume_create_and_remove(sse_server: str, streams: list[LiveStream], dclient: Any) -> None:
    networks = open_stream(streams, sse_server, "/networks")
    volumes = open_stream(streams, sse_server, "/volumes")
    started = time.monotonic()
    network = dclient.networks.create(unique("net"), driver="overlay", labels={TEST_LABEL: "1"})
    volume = dclient.volumes.create(unique("vol"), labels={TEST_LABEL: "1"})
    try:
        assert_within(networks.wait_item(started, 5, action="create", id=network.id), started,
                      DELIVERY + ENGINE_SLACK)
        assert_within(volumes.wait_item(started, 5, action="create", id=volume.name), started,
                      DELIVERY + ENGINE_SLACK)
    finally:
        started = time.monotonic()
        network.remove()
        volume.remove()
    assert_within(networks.wait_item(started, 5, action="remove", id=network.id), started,
                  DELIVERY + ENGINE_SLACK)
    assert_within(volumes.wait_item(started, 5, action="remove", id=volume.name), started,
                  DELIVERY + ENGINE_SLACK)


def test_node_label_update(sse_server: str, streams: list[LiveStream], dclient: Any) -> None:
    node = dclient.nodes.list()[0]
    stream = open_stream(streams, sse_server, f"/nodes/{node.id}")
    key = unique("label")
    started = time.monotonic()
    for _ in range(5):       # node status moves the version: retry a conflict
        node.reload()
        spec = node.attrs["Spec"]
        try:
            node.update({**spec, "Labels": {**spec.get("Labels", {}), key: "1"}})
            break
        except docker.errors.APIError:
            time.sleep(0.2)   # retry pacing of this bounded loop after a version conflict
    try:
        updated = assert_within(stream.wait_item(started, 5, action="update", id=node.id), started,
                                DELIVERY + ENGINE_SLACK)
        assert updated["resource"]["Spec"]["Labels"][key] == "1"
    finally:
        for _ in range(5):
            node.reload()
            spec = node.attrs["Spec"]
            try:
                node.update({**spec, "Labels": {k: v for k, v in spec.get("Labels", {}).items() if k != key}})
                break
            except docker.errors.APIError:
                time.sleep(0.2)   # retry pacing of this bounded loop after a version conflict


def test_a_stack_stream_carries_its_members_events(sse_server: str, streams: list[LiveStream],
                                                   dclient: Any) -> None:
    stack = unique("stack").replace("-", "")
    stream = open_stream(streams, sse_server, "/stacks/demo")
    own = open_stream(streams, sse_server, "/events?types=stack,service")
    labels = {"com.docker.stack.namespace": "demo"}
    started = time.monotonic()
    config = dclient.configs.create(name=f"demo_{stack}", data=b"x", labels={TEST_LABEL: "1", **labels})
    service = sleeper(dclient, f"demo_{stack}", replicas=1, labels=labels)
    try:
        assert_within(stream.wait_item(started, 5, action="create", id=config.id), started,
                      DELIVERY + ENGINE_SLACK)
        assert_within(stream.wait_item(started, 5, action="create", id=service.id), started,
                      DELIVERY + ENGINE_SLACK)
        # the stack's other members (demo_crasher restarts) have task events too: find this service's
        task = wait_for(lambda: next((item for item, received in stream.items()
                                      if received.at >= started and item.get("type") == "task"
                                      and (item.get("resource") or {}).get("ServiceID") == service.id), None),
                        15, interval=0.02, message="a task event of the new member service")
        assert task["resource"]["ServiceID"] == service.id  # type: ignore[index]
        stream.wait_item(started, 5, type="stack", id="demo")       # the stack itself (ref_changed)
        assert not [i for i, _ in own.items() if i["type"] not in ("stack", "service")]
    finally:
        service.remove()
        config.remove()
    outsider = sleeper(dclient, unique("outside"), replicas=0)
    try:
        own.wait_item(started, 5, action="create", id=outsider.id)
        time.sleep(DELIVERY)   # not a wait: the window in which the stack's stream may not show the outsider
        assert all(item["id"] != outsider.id for item, _ in stream.items())
    finally:
        outsider.remove()


def test_types_filter_and_unknown_type(sse_server: str, streams: list[LiveStream], dclient: Any) -> None:
    configs_only = open_stream(streams, sse_server, "/events?types=config")
    started = time.monotonic()
    service = sleeper(dclient, unique("typed"), replicas=0)
    config = dclient.configs.create(name=unique("typed"), data=b"x", labels={TEST_LABEL: "1"})
    try:
        configs_only.wait_item(started, 5, action="create", id=config.id)
        assert {item["type"] for item, _ in configs_only.items()} == {"config"}
    finally:
        service.remove()
        config.remove()
    refused = httpx.get(f"{sse_server}/events?types=config,unicorn", headers={"Accept": "text/event-stream"})
    assert refused.status_code == 400 and refused.json()["type"] == "/api/errors/SSE002"


def test_reconnect_with_last_event_id_gets_exactly_the_missed_events(sse_server: str, streams: list[LiveStream],
                                                                     dclient: Any) -> None:
    first = open_stream(streams, sse_server, "/configs")
    started = time.monotonic()
    marker = dclient.configs.create(name=unique("before"), data=b"x", labels={TEST_LABEL: "1"})
    created: list[Any] = [marker]
    try:
        first.wait_item(started, 5, action="create", id=marker.id)
        last_id = first.last_id()
        first.close()
        streams.remove(first)
        missed = [dclient.configs.create(name=unique("missed"), data=b"x", labels={TEST_LABEL: "1"})
                  for _ in range(3)]
        created += missed
        for config in missed:    # the watcher recorded them before the client reconnects
            wait_for(lambda c=config: httpx.get(f"{sse_server}/configs/{c.id}").status_code == 200, 15,
                     message="the missed config in the cache")
        for headers, path in (({"Last-Event-ID": last_id}, "/configs"), ({}, f"/configs?lastEventId={last_id}")):
            again = open_stream(streams, sse_server, path, **headers)
            wait_for(lambda s=again: len(s.items()) >= 3, 5, message="the replay")
            time.sleep(0.3)   # not a wait: a window in which no fourth event may follow the replay
            replayed = [(item["action"], item["id"]) for item, _ in again.items()]
            # Exactly the three missed creates (the watcher may apply them in another order), once each.
            assert sorted(replayed) == sorted(("create", c.id) for c in missed), replayed
    finally:
        for config in created:
            config.remove()


def test_a_bogus_last_event_id_gets_sync(sse_server: str, streams: list[LiveStream]) -> None:
    for value in ("bogus", "99999999999999"):
        stream = open_stream(streams, sse_server, "/events", **{"Last-Event-ID": value})
        received = wait_for(lambda s=stream: s.events, 5, message="sync")
        assert isinstance(received, list)
        assert received[0].event == "sync" and received[0].data["action"] == "full_sync"


def _raw_stream(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "closed before the headers"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return sock


def _open_streams(base: str) -> float:
    text = httpx.get(f"{base}/-/metrics", timeout=5).text
    line = next(line for line in text.splitlines() if line.startswith("shoal_open_streams "))
    return float(line.split()[1])


def test_the_257th_stream_is_refused_and_the_cap_frees_when_clients_leave(sse_server: str) -> None:
    port = int(sse_server.rsplit(":", 1)[1])
    wait_for(lambda: _open_streams(sse_server) == 0, 10, message="no stream left by earlier tests")
    sockets = [_raw_stream(port) for _ in range(256)]
    try:
        assert _open_streams(sse_server) == 256
        refused = httpx.get(f"{sse_server}/events", headers={"Accept": "text/event-stream"}, timeout=5)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
        assert refused.json()["type"] == "/api/errors/SSE001"
    finally:
        for sock in sockets[:10]:
            sock.close()
    # Clients that hang up are noticed within the liveness interval (1 s), well inside the keepalive.
    wait_for(lambda: _open_streams(sse_server) == 246, 5, message="ten closed streams released")
    again = httpx.Client(base_url=sse_server, timeout=5)
    with connect_sse(again, "GET", "/events", headers={"Accept": "text/event-stream"}) as source:
        assert source.response.status_code == 200
    again.close()
    for sock in sockets[10:]:
        sock.close()
    wait_for(lambda: _open_streams(sse_server) == 0, 5, message="every stream released")


def test_sigterm_ends_open_streams_at_once(docker_host: str, tmp_path: Path) -> None:
    """A graceful stop does not wait its timeout (10 s) for event streams, nor for log tails (their engine
    streams are closed): they end, the worker exits."""
    proc, base = start_server(docker_host, tmp_path / "server.log")
    opened: list[LiveStream] = []
    try:
        ticker = requests.get(f"{base}/services?search=demo_ticker", timeout=10).json()["items"][0]["ID"]
        for path in ("/events", "/services", "/stacks/demo", f"/services/{ticker}/logs", "/stacks/demo/logs"):
            open_stream(opened, base, path)
        started = time.monotonic()
        proc.terminate()
        assert proc.wait(timeout=8) == 0
        assert time.monotonic() - started < 5
        wait_for(lambda: all(s._reader.dead for s in opened), 5, message="every stream ended")
        assert "graceful timeout" not in (tmp_path / "server.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in opened:
            stream.close()
