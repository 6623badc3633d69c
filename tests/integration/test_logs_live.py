"""Log endpoints against the lab engine through a real gunicorn (gevent worker on 127.0.0.1): live tails of
demo_ticker (one stdout and one stderr line a second) within 1 s, the cursor, the 128-stream cap, stack
logs, text downloads, the stream filter, parameter errors, a tail that follows a replaced task."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import gevent
import httpx
import pytest
import requests

from app.logs.timestamps import NS_PER_SECOND, parse_rfc3339
from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL

pytestmark = pytest.mark.integration
DELIVERY = 1.0          # seconds from a line being written to its event (the target bound)
CAP = 128
TEXT_LINE = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \S+ (stdout|stderr) "


@pytest.fixture(scope="module")
def log_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    directory = tmp_path_factory.mktemp("logs")
    log_path = directory / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_LOG_LEVEL="warn", SERVICE_SSE_KEEPALIVE="1s",
                       SERVICE_DATA_DIR=str(directory / "state"))
    proc = launch_gunicorn(env, log_path, base)
    yield base
    stop_gunicorn(proc, log_path, check_code=False)


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


def service_id(base: str, name: str) -> str:
    found = requests.get(f"{base}/services", params={"search": name, "limit": "200"}, timeout=10).json()["items"]
    return str(next(item["ID"] for item in found if item["Spec"]["Name"] == name))


@pytest.fixture(scope="module")
def ticker(log_server: str) -> str:
    return service_id(log_server, "demo_ticker")


@dataclass
class Tail:
    """An SSE log tail read by its own greenlet: (id, LogLine, monotonic and wall receive times)."""

    base: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any], float, float]] = field(default_factory=list)
    status: int | None = None
    problem: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self._http = httpx.Client(base_url=self.base, timeout=httpx.Timeout(10, read=30))
        self._reader = gevent.spawn(self._read)
        wait_for(lambda: self.status is not None, 10, message=f"tail {self.path} opened")

    def _read(self) -> None:
        headers = {"Accept": "text/event-stream", **self.headers}
        with self._http.stream("GET", self.path, headers=headers) as response:
            self.status = response.status_code
            if response.status_code != 200:
                self.problem = json.loads(response.read())
                return
            event_id, data = "", ""
            for raw in response.iter_lines():
                if raw.startswith("id: "):
                    event_id = raw[4:]
                elif raw.startswith("data: "):
                    data = raw[6:]
                elif raw == "" and data:
                    self.events.append((event_id, json.loads(data), time.monotonic(), time.time()))
                    event_id, data = "", ""

    def wait_lines(self, count: int, timeout: float) -> list[tuple[str, dict[str, Any], float, float]]:
        wait_for(lambda: len(self.events) >= count, timeout, interval=0.02, message=f"{count} lines on {self.path}")
        return list(self.events)

    def close(self) -> None:
        self._reader.kill(block=True, timeout=5)
        self._http.close()


@pytest.fixture
def tails() -> Iterator[list[Tail]]:
    opened: list[Tail] = []
    yield opened
    for tail in opened:
        tail.close()


def open_tail(tails: list[Tail], base: str, path: str, **headers: str) -> Tail:
    tail = Tail(base, path, headers)
    tails.append(tail)
    return tail


def page(base: str, path: str, **params: str) -> dict[str, Any]:
    response = requests.get(f"{base}{path}", params=params, timeout=20)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --------------------------------------------------------------------------- live tail
def test_a_following_client_gets_each_ticker_line_within_a_second(log_server: str, ticker: str,
                                                                  tails: list[Tail]) -> None:
    tail = open_tail(tails, log_server, f"/services/{ticker}/logs")
    assert tail.status == 200
    events = tail.wait_lines(6, 10)
    delays = [wall - parse_rfc3339(line["timestamp"]) / NS_PER_SECOND for _, line, _, wall in events]
    assert all(-0.5 < delay < DELIVERY for delay in delays), delays
    for event_id, line, _, _ in events:
        assert event_id == line["timestamp"]
        assert line["attrs"]["serviceId"] == ticker and line["attrs"]["serviceName"] == "demo_ticker"
    assert {line["stream"] for _, line, _, _ in events} == {"stdout", "stderr"}


def test_a_tail_resumes_after_last_event_id_and_filters_the_stream(log_server: str, ticker: str,
                                                                   tails: list[Tail]) -> None:
    first = open_tail(tails, log_server, f"/services/{ticker}/logs")
    seen = first.wait_lines(2, 10)
    last_id = seen[0][0]
    resumed = open_tail(tails, log_server, f"/services/{ticker}/logs?stream=stderr", **{"Last-Event-ID": last_id})
    lines = [line for _, line, _, _ in resumed.wait_lines(3, 10)]
    assert all(line["stream"] == "stderr" and line["message"].startswith("warn") for line in lines)
    assert all(line["timestamp"] > last_id for line in lines)


def test_a_tail_follows_a_replaced_task(log_server: str, dclient: docker.DockerClient, tails: list[Tail]) -> None:
    name = f"t-logs-{uuid.uuid4().hex[:8]}"
    service = dclient.services.create(  # type: ignore[no-untyped-call]
        IMAGE, ["sh", "-c", "while true; do echo line; sleep 0.3; done"], name=name, labels={TEST_LABEL: "1"},
        init=True, stop_grace_period=1_000_000_000,
        mode=docker.types.ServiceMode("replicated", replicas=1))
    try:
        wait_for(lambda: requests.get(f"{log_server}/services/{service.id}", timeout=5).status_code == 200, 20,
                 message="the new service in the cache")
        tail = open_tail(tails, log_server, f"/services/{service.id}/logs")
        first = tail.wait_lines(1, 30)[0][1]["attrs"]["taskId"]
        service.force_update()
        wait_for(lambda: any(line["attrs"]["taskId"] != first for _, line, _, _ in tail.events), 40,
                 interval=0.2, message="a line of the replacement task on the same tail")
    finally:
        service.remove()


# --------------------------------------------------------------------------- JSON pages and the cursor
def test_the_cursor_returns_only_strictly_newer_lines(log_server: str, ticker: str) -> None:
    first = page(log_server, f"/services/{ticker}/logs", limit="10")
    assert first["@type"] == "LogResponse" and first["@id"] == f"/services/{ticker}/logs"
    assert len(first["lines"]) == 10 and first["hasMore"] is True
    stamps = [line["timestamp"] for line in first["lines"]]
    assert stamps == sorted(stamps) and first["oldest"] == stamps[0] and first["newest"] == stamps[-1]
    assert parse_rfc3339(first["cursor"]) == parse_rfc3339(stamps[-1]) + 1

    def newer_page() -> dict[str, Any] | None:
        body = page(log_server, f"/services/{ticker}/logs", since=first["cursor"])
        return body if len(body["lines"]) >= 3 else None

    second = wait_for(newer_page, 30, interval=0.2, message="three ticker lines after the cursor")
    assert isinstance(second, dict)
    newer = [line["timestamp"] for line in second["lines"]]
    assert len(newer) >= 3, second
    assert all(stamp > stamps[-1] for stamp in newer) and not set(newer) & set(stamps)
    assert len(newer) == len(set(newer))
    third = page(log_server, f"/services/{ticker}/logs", since=second["cursor"])
    assert not set(line["timestamp"] for line in third["lines"]) & set(newer)
    assert third["cursor"] >= second["cursor"]


def test_nothing_new_echoes_the_given_since(log_server: str, ticker: str) -> None:
    future = "2099-01-01T00:00:00.000000000Z"
    body = page(log_server, f"/services/{ticker}/logs", since=future)
    assert body["lines"] == [] and body["cursor"] == future and body["newest"] is None


def test_after_before_and_stream_filter_a_page(log_server: str, ticker: str) -> None:
    body = page(log_server, f"/services/{ticker}/logs", after="30s", before="10s", stream="stderr", limit="100")
    now = time.time()
    assert 15 <= len(body["lines"]) <= 22, len(body["lines"])
    for line in body["lines"]:
        age = now - parse_rfc3339(line["timestamp"]) / NS_PER_SECOND
        assert 9 < age < 32 and line["stream"] == "stderr"


def test_task_logs(log_server: str, ticker: str) -> None:
    tasks = requests.get(f"{log_server}/services/{ticker}/tasks", timeout=10).json()["items"]
    running = next(task for task in tasks if task["Status"]["State"] == "running")
    body = page(log_server, f"/tasks/{running['ID']}/logs", limit="4")
    assert len(body["lines"]) == 4
    assert {line["attrs"]["taskId"] for line in body["lines"]} == {running["ID"]}
    assert all(line["attrs"]["slot"] == running["Slot"] for line in body["lines"])


def test_stack_logs_are_merged_and_labelled(log_server: str) -> None:
    body = page(log_server, "/stacks/demo/logs", limit="200", after="1m")
    stamps = [line["timestamp"] for line in body["lines"]]
    assert stamps == sorted(stamps)
    names = {line["attrs"].get("serviceName") for line in body["lines"]}
    assert "demo_ticker" in names and names <= {"demo_web", "demo_api", "demo_ticker", "demo_crasher",
                                                "demo_pending"}, names
    assert all(isinstance(line["attrs"].get("slot"), int) for line in body["lines"])


def test_a_stack_tail_carries_labelled_lines(log_server: str, tails: list[Tail]) -> None:
    tail = open_tail(tails, log_server, "/stacks/demo/logs")
    lines = [line for _, line, _, _ in tail.wait_lines(2, 10)]
    assert {"demo_ticker"} <= {line["attrs"]["serviceName"] for line in lines}


def test_text_download(log_server: str, ticker: str) -> None:
    response = requests.get(f"{log_server}/services/{ticker}/logs", params={"limit": "6"},
                            headers={"Accept": "text/plain"}, timeout=20)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/plain")
    rows = response.text.splitlines()
    assert len(rows) == 6 and all(re.match(TEXT_LINE, row) for row in rows), rows
    assert all(" demo_ticker.1 " in row for row in rows)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("params", "accept", "code"), [
    ({"stream": "both"}, "application/json", "LOG002"),
    ({"after": "yesterday"}, "application/json", "LOG003"),
    ({"since": "1 h"}, "text/event-stream", "LOG003"),
    ({"before": "soon"}, "application/json", "LOG004"),
    ({"before": "1h"}, "text/event-stream", "LOG005"),
])
def test_bad_parameters(log_server: str, ticker: str, params: dict[str, str], accept: str, code: str) -> None:
    response = requests.get(f"{log_server}/services/{ticker}/logs", params=params, headers={"Accept": accept},
                            timeout=10)
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_atom_is_not_acceptable(log_server: str, ticker: str) -> None:
    for url in (f"{log_server}/services/{ticker}/logs", f"{log_server}/services/{ticker}/logs.atom"):
        response = requests.get(url, headers={"Accept": "application/atom+xml"}, timeout=10)
        assert response.status_code == 406 and response.json()["code"] == "API003"


@pytest.mark.parametrize("path", ["/services/nope/logs", "/tasks/nope/logs", "/stacks/nope/logs"])
def test_missing_objects_are_404(log_server: str, path: str) -> None:
    for accept in ("application/json", "text/event-stream", "text/plain"):
        response = requests.get(f"{log_server}{path}", headers={"Accept": accept}, timeout=10)
        assert response.status_code == 404 and response.json()["type"] == "about:blank"


# --------------------------------------------------------------------------- the cap
def _raw_tail(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


def _head(sock: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "closed before the headers"
        head += chunk
    return head


def _tail_status(base: str, path: str) -> int:
    with httpx.Client(base_url=base, timeout=10) as client, \
            client.stream("GET", path, headers={"Accept": "text/event-stream"}) as response:
        return response.status_code


def _open_all(port: int, path: str, count: int, deadline: float) -> list[socket.socket]:
    """``count`` open tails; one refused (a slot of an earlier test's client not yet noticed gone, within
    the 1 s liveness interval) is retried until ``deadline``."""
    opened: list[socket.socket] = []
    while len(opened) < count:
        assert time.monotonic() < deadline, f"only {len(opened)} tails opened"
        batch = [_raw_tail(port, path) for _ in range(count - len(opened))]
        heads = [gevent.spawn(_head, sock) for sock in batch]
        gevent.joinall(heads, timeout=60, raise_error=True)   # (it returns them in the order they finished)
        for sock, head in zip(batch, heads, strict=True):
            if head.value.startswith(b"HTTP/1.1 200"):
                opened.append(sock)
            else:
                assert head.value.startswith(b"HTTP/1.1 429"), head.value[:200]
                sock.close()
        if len(opened) < count:
            time.sleep(0.5)   # retry pacing of this bounded loop: a refused slot frees within the 1 s liveness check
    return opened


def test_the_129th_log_stream_is_refused_and_slots_free_when_clients_leave(log_server: str, ticker: str) -> None:
    port = int(log_server.rsplit(":", 1)[1])
    path = f"/services/{ticker}/logs"
    started = time.monotonic()
    sockets = _open_all(port, path, CAP, started + 60)
    try:
        opened = time.monotonic() - started
        refused = requests.get(f"{log_server}{path}", headers={"Accept": "text/event-stream"}, timeout=10,
                               stream=True)    # a bug giving 200 must not hang the test
        assert refused.status_code == 429, refused.headers
        assert refused.headers["Retry-After"] == "5" and json.loads(refused.content)["code"] == "LOG001"
    finally:
        for sock in sockets:
            sock.close()
    wait_for(lambda: _tail_status(log_server, path) == 200, 10, interval=0.2,
             message="a new tail accepted once the clients left")
    assert opened < 60
