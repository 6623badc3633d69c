"""HTTP edges (docs/read-api.md) against the real server (gunicorn with its gevent worker, and ``shoal``) and the lab
engine: huge client integers, Last-Modified after a task of the service changed, ETag per variant and
If-Range, a volume named ``*.json`` at its own @id, bounded metrics labels, no redirect from Host, and
the server's own errors (414, 431, 400) as problems with Request-Id and security headers. Raw sockets
go to 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from pathlib import Path

import docker
import pytest
import requests

from tests.conftest import REPO, free_port, wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration
V1 = "application/vnd.service.v1+json"
SECURITY = ("X-Content-Type-Options", "X-Frame-Options", "Content-Security-Policy", "Referrer-Policy")
VISIBLE = 15


# --------------------------------------------------------------------------- raw HTTP to 127.0.0.1
def raw(base: str, request: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; read the whole answer (the server closes after an error)."""
    host, port = base.removeprefix("http://").split(":")
    assert host == "127.0.0.1"
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(body) >= length:
                break
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return status, headers, body


OVERSIZED = {
    "request line over the limit": (b"GET /services?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    "too many header fields": (b"GET /services HTTP/1.1\r\nHost: x\r\n"
                               + b"".join(b"X-F%d: 1\r\n" % i for i in range(150)) + b"\r\n", 431),
    "header field over the limit": (b"GET /services HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
    "malformed request line": (b"GET\x01 /services HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
    "content length of 5,000 digits": (b"GET /services HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * 5000
                                       + b"\r\n\r\n", 400),
}


def assert_problem(status: int, headers: dict[str, str], body: bytes, expected: int) -> None:
    assert status == expected, (status, headers, body[:300])
    assert headers["content-type"] == "application/problem+json", headers
    assert len(headers["request-id"]) == 32, headers
    for name in SECURITY:
        assert name.lower() in headers, (name, headers)
    assert headers["cache-control"] == "no-store"
    problem = json.loads(body)
    assert problem["status"] == expected and problem["type"] == "about:blank"
    assert problem["requestId"] == headers["request-id"]
    assert problem["@type"] == "Problem" and problem["title"]


@pytest.mark.parametrize("case", sorted(OVERSIZED))
def test_gunicorn_errors_are_problems_with_request_id_and_security_headers(server: str, case: str) -> None:
    request, expected = OVERSIZED[case]
    assert_problem(*raw(server, request), expected)


def test_requests_within_the_limits_are_served(server: str) -> None:
    line = b"GET /services?x=" + b"a" * 7000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    fields = b"".join(b"X-F%d: 1\r\n" % i for i in range(90)) + b"X-Big: " + b"b" * 7000 + b"\r\n"
    status, headers, _ = raw(server, line + fields + b"\r\n")
    assert status == 200, headers


@contextmanager
def shoal_server(docker_host: str, workdir: Path) -> Iterator[str]:
    port, log = free_port(), workdir / "shoal.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")},
           "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}", "HOME": str(workdir),
           "SERVICE_DATA_DIR": str(workdir / "state")}
    with log.open("wb") as output:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "shoal")], cwd=REPO, env=env, stdout=output,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{base}/-/health", timeout=2).status_code == 200, 20, interval=0.2,
                 message="shoal /-/health")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]


def test_the_shoal_dev_server_has_the_same_limits_and_problems(docker_host: str, tmp_path: Path) -> None:
    with shoal_server(docker_host, tmp_path) as base:
        for case in sorted(OVERSIZED):
            request, expected = OVERSIZED[case]
            status, headers, body = raw(base, request)
            try:
                assert_problem(status, headers, body, expected)
            except AssertionError as exc:
                raise AssertionError(f"{case}: {exc}") from None


# --------------------------------------------------------------------------- integers, validators, names
def test_huge_client_integers_are_never_a_500(server: str) -> None:
    big = "9" * 4400
    assert requests.get(f"{server}/tasks", headers={"Range": f"items=0-{big}"}, timeout=10).status_code in (200, 206)
    past = "9" * 4050   # two numbers of 4,400 digits would pass the 8,190-byte header field limit (431)
    assert requests.get(f"{server}/tasks", headers={"Range": f"items={past}-{past}"}, timeout=10).status_code == 416
    page = requests.get(f"{server}/tasks", params={"offset": big}, timeout=10)
    assert page.status_code == 200 and page.json()["items"] == []
    assert requests.get(f"{server}/tasks", params={"limit": big}, timeout=10).json()["limit"] == 200
    assert requests.get(f"{server}/tasks", params={"limit": "\u0661"}, timeout=10).json()["limit"] == 50


def test_variants_have_their_own_etags_and_if_range_is_honoured(server: str) -> None:
    plain = requests.get(f"{server}/services", timeout=10)
    pinned = requests.get(f"{server}/services", headers={"Accept": V1}, timeout=10)
    assert plain.content == pinned.content and plain.headers["ETag"] != pinned.headers["ETag"]
    assert len(plain.headers["ETag"]) == 66   # the full SHA-256 in hex, quoted
    ranged = requests.get(f"{server}/tasks", headers={"Range": "items=0-1"}, timeout=10)
    assert ranged.status_code == 206
    same = requests.get(f"{server}/tasks", headers={"Range": "items=0-1", "If-Range": ranged.headers["ETag"]},
                        timeout=10)
    assert same.status_code == 206
    other = requests.get(f"{server}/tasks", headers={"Range": "items=0-1", "If-Range": '"old"'}, timeout=10)
    assert other.status_code == 200 and "Content-Range" not in other.headers


@pytest.fixture
def dclient(docker_host: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=60)
    yield client
    client.close()


def test_last_modified_moves_when_a_task_of_the_service_changes(server: str, dclient: docker.DockerClient) -> None:
    service = sleeper(dclient, f"shoal-it-lm-{uuid.uuid4().hex[:8]}")
    try:
        url = f"{server}/services/{service.id}"

        def running() -> requests.Response | None:
            response = requests.get(url, timeout=10)
            tasks = response.json().get("tasks", []) if response.status_code == 200 else []
            return response if [t["state"] for t in tasks] == ["running"] else None

        settled = wait_for(running, 60, interval=0.2, message="one running task")
        assert isinstance(settled, requests.Response)
        since = settled.headers["Last-Modified"]
        assert requests.get(url, headers={"If-Modified-Since": since}, timeout=10).status_code == 304
        # Last-Modified has second precision: the change must fall in a later second than ``since``.
        later = parsedate_to_datetime(since).timestamp() + 1
        wait_for(lambda: time.time() >= later, 5, interval=0.02, message="the next second")
        task_id = settled.json()["tasks"][0]["id"]
        container = next(c for c in dclient.containers.list()
                         if c.labels.get("com.docker.swarm.task.id") == task_id)
        container.kill()  # the task fails and is replaced; the service's own UpdatedAt does not move

        def modified() -> requests.Response | None:
            response = requests.get(url, headers={"If-Modified-Since": since}, timeout=10)
            return response if response.status_code == 200 else None

        changed = wait_for(modified, VISIBLE, interval=0.1, message="a 200 after the task failed")
        assert isinstance(changed, requests.Response)
        assert changed.content != settled.content
        assert parsedate_to_datetime(changed.headers["Last-Modified"]) > parsedate_to_datetime(since)
        assert changed.json()["service"]["UpdatedAt"] == settled.json()["service"]["UpdatedAt"]
    finally:
        service.remove()
        settle(server)


def settle(server: str, quiet: float = 3.0, timeout: float = 30.0) -> None:
    """Wait until the server has said ``Cache-Freshness: live`` for ``quiet`` seconds in a row: the next test
    of the shared server (test_api_server's freshness check) must not see a stale moment from this one."""
    deadline, live_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        live = requests.get(f"{server}/-/ready", timeout=10).status_code == 200 and \
            requests.get(f"{server}/services", timeout=10).headers.get("Cache-Freshness") == "live"
        now = time.monotonic()
        live_since = (live_since or now) if live else None
        if live_since is not None and now - live_since >= quiet:
            return
        time.sleep(0.1)   # the poll interval of this bounded wait for a live stretch
    raise AssertionError(f"the server did not stay live for {quiet} s within {timeout} s")


def test_a_volume_named_like_a_format_is_served_at_its_own_id(server: str, dclient: docker.DockerClient) -> None:
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    volumes = [dclient.volumes.create(name + ".json"), dclient.volumes.create(name)]
    try:
        wait_for(lambda: requests.get(f"{server}/volumes/{name}.json", timeout=10).json()
                 .get("volume", {}).get("Name") == name + ".json", VISIBLE, interval=0.1,
                 message="volume *.json at its own @id")
        exact = requests.get(f"{server}/volumes/{name}.json", timeout=10).json()
        assert exact["@id"] == f"/volumes/{name}.json"
        assert requests.get(f"{server}/volumes/{name}.json.json", timeout=10).json()["volume"]["Name"] == name + ".json"
        assert requests.get(f"{server}/volumes/{name}", timeout=10).json()["volume"]["Name"] == name
    finally:
        for volume in volumes:
            volume.remove(force=True)
        settle(server)


# --------------------------------------------------------------------------- metrics, redirects
def test_metrics_labels_are_route_templates_and_known_methods(server: str) -> None:
    marker = uuid.uuid4().hex
    requests.get(f"{server}/services/{marker}", timeout=10)
    requests.get(f"{server}/{marker}/x", timeout=10)
    requests.request("FROBNICATE", f"{server}/services", timeout=10)
    text = requests.get(f"{server}/-/metrics", timeout=10).text
    assert marker not in text
    assert 'route="/services/{id}"' in text and 'route="unmatched"' in text
    assert "FROBNICATE" not in text and 'method="other"' in text


def test_no_redirect_is_built_from_the_host_header(server: str) -> None:
    for path in ("/api//errors", "/services//x", "/volumes//x.json"):
        status, headers, _ = raw(server, f"GET {path} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
                                 .encode())
        assert "evil.example" not in headers.get("location", ""), (path, status, headers)
