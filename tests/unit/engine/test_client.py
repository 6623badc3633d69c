"""DockerEngine (docs/resilience.md): every call has a timeout and a timeout is EngineUnavailable; task listings are
decoded element by element (same result as json.loads) and refuse malformed bodies."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest

from app.engine.client import DockerEngine, EngineUnavailable, ServiceGone, decode_array, decode_listing
from app.resources import ResourceKind
from tests.unit.objects import Raw


@pytest.mark.parametrize("body", ["[]", " [ ] ", '[{"ID": "a", "Version": {"Index": 1}}]',
                                  '\n[ {"ID":"a","X":[1,{"y":"]"}]} ,\t{"ID":"b"} ]\n'])
def test_decode_array_agrees_with_json_loads(body: str) -> None:
    assert decode_array(body.encode()) == json.loads(body)


def test_decode_array_on_the_synthetic_cluster(objects: dict[ResourceKind, list[Raw]]) -> None:
    body = json.dumps(objects[ResourceKind.TASK], indent=1).encode()
    listing = decode_listing(body)
    assert listing.raws == objects[ResourceKind.TASK] and listing.versioned


@pytest.mark.parametrize("body", ['{"ID": "a"}', '[{"ID": "a"} {"ID": "b"}]', "[1,", ""])
def test_a_malformed_listing_is_engine_unavailable(body: str) -> None:
    with pytest.raises((EngineUnavailable, ValueError)):
        decode_array(body.encode())


@pytest.fixture
def silent_engine(tmp_path: Path) -> Iterator[str]:
    """A unix socket that accepts connections and never answers (a hung engine)."""
    path = tmp_path / "hung.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            accepted.append(conn)

    acceptor = gevent.spawn(accept)
    yield f"unix://{path}"
    acceptor.kill()
    for conn in accepted:
        conn.close()
    server.close()


@pytest.mark.parametrize("call", ["list_tasks", "service_counts", "inspect", "list", "ping"])
def test_a_hung_engine_times_out_as_engine_unavailable(silent_engine: str, call: str) -> None:
    engine = DockerEngine(silent_engine, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable):
        if call == "inspect":
            engine.inspect(ResourceKind.SERVICE, "x")
        elif call == "list":
            engine.list(ResourceKind.SERVICE)
        elif call == "ping":
            engine.ping(0.3)
        else:
            getattr(engine, call)()
    assert time.monotonic() - started < 3


def test_a_listing_that_trickles_past_its_deadline_is_engine_unavailable(tmp_path: Path) -> None:
    """Each read answers within the per-read timeout, but the whole body takes too long."""
    path = tmp_path / "slow.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def trickle() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        conn.sendall(b"1\r\n[\r\n")
        for _ in range(200):  # bounded: 200 chunks of 300 KB, 50 ms apart
            item = b'{"ID":"' + b"x" * 300_000 + b'"},'
            conn.sendall(f"{len(item):x}\r\n".encode() + item + b"\r\n")
            gevent.sleep(0.05)   # a deliberately slow engine: the body trickles in
        conn.close()

    feeder = gevent.spawn(trickle)
    engine = DockerEngine(f"unix://{path}", timeout=2, listing_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(EngineUnavailable, match="longer than"):
            engine.list_tasks()
        assert time.monotonic() - started < 3
    finally:
        feeder.kill()
        server.close()


@pytest.fixture
def answering_engine(tmp_path: Path) -> Iterator[tuple[str, list[bytes], list[bytes]]]:
    """A unix socket answering each request with the next of ``answers`` (keep-alive), recording requests."""
    path = tmp_path / "engine.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    answers: list[bytes] = []
    requests_seen: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        requests_seen.append(b"CONNECT")
        with conn:
            for _ in range(100):   # bounded: a test sends a few requests
                head = conn.recv(65536)
                if not head:
                    return
                requests_seen.append(head)
                conn.sendall(answers.pop(0))

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            gevent.spawn(serve, conn)

    acceptor = gevent.spawn(accept)
    yield f"unix://{path}", answers, requests_seen
    acceptor.kill()
    server.close()


def ok(body: bytes = b"OK", status: str = "200 OK") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def test_the_ping_asks_the_versioned_ping_and_reuses_its_connection(
        answering_engine: tuple[str, list[bytes], list[bytes]]) -> None:
    url, answers, seen = answering_engine
    answers += [ok(), ok()]
    engine = DockerEngine(url, api_version="1.41")
    engine.ping(1.0)
    engine.ping(1.0)
    assert [head.split(b"\r\n")[0] for head in seen] == [b"CONNECT"] + [b"GET /v1.41/_ping HTTP/1.1"] * 2
    assert not answers


@pytest.mark.parametrize("status", ["500 Internal Server Error", "404 Not Found"])
def test_a_ping_answered_with_an_error_is_engine_unavailable(
        answering_engine: tuple[str, list[bytes], list[bytes]], status: str) -> None:
    url, answers, _ = answering_engine
    answers.append(ok(b"no", status))
    with pytest.raises(EngineUnavailable, match=status.split()[0]):
        DockerEngine(url).ping(1.0)


def test_a_ping_to_no_engine_is_engine_unavailable(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable):
        DockerEngine(f"unix://{tmp_path / 'absent.sock'}").ping(0.5)


def chunked(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


def test_scoped_listings_and_counts_share_one_connection(
        answering_engine: tuple[str, list[bytes], list[bytes]], objects: dict[ResourceKind, list[Raw]]) -> None:
    """The SDK keys its unix pools by the whole URL: each service's scoped listing opened a connection of
    its own. The poller's reads share one pool (and one connection when they come one after another)."""
    url, answers, seen = answering_engine
    tasks = objects[ResourceKind.TASK]
    services = sorted({t["ServiceID"] for t in tasks})
    answers += [chunked(json.dumps(tasks).encode()) for _ in services]
    answers.append(ok(json.dumps([{"ID": "s1", "ServiceStatus": {"RunningTasks": 1, "DesiredTasks": 2}}]).encode()))
    engine = DockerEngine(url)
    for service_id in services:
        listing = engine.list_tasks(service_id)
        assert set(listing.versions) == {t["ID"] for t in tasks if t["ServiceID"] == service_id}
    assert engine.service_counts() == {"s1": (1, 2, 0)}
    assert seen.count(b"CONNECT") == 1
    lines = [head.split(b"\r\n")[0].decode() for head in seen if head != b"CONNECT"]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(lines[0].split(" ")[1]).query)
    assert json.loads(query["filters"][0]) == {"service": [services[0]]}
    assert lines[-1] == "GET /v1.41/services?status=true HTTP/1.1"


def test_a_listing_of_a_removed_service_is_service_gone_and_a_5xx_engine_unavailable(
        answering_engine: tuple[str, list[bytes], list[bytes]]) -> None:
    url, answers, _ = answering_engine
    answers += [ok(b'{"message": "service x not found"}', "404 Not Found"),
                ok(b'{"message": "boom"}', "500 Internal Server Error"),
                ok(b'{"message": "boom"}', "500 Internal Server Error")]
    engine = DockerEngine(url)
    with pytest.raises(ServiceGone):
        engine.list_tasks("x")
    with pytest.raises(EngineUnavailable, match="500"):
        engine.list_tasks("y")
    with pytest.raises(EngineUnavailable, match="500"):
        engine.service_counts()


def test_a_sweep_whose_body_has_the_known_digest_is_not_decoded(
        answering_engine: tuple[str, list[bytes], list[bytes]], objects: dict[ResourceKind, list[Raw]]) -> None:
    url, answers, _ = answering_engine
    body = json.dumps(objects[ResourceKind.TASK]).encode()
    answers += [chunked(body), chunked(body), chunked(body + b" ")]
    engine = DockerEngine(url)
    listing, digest = engine.list_tasks_changed(None)
    assert listing is not None and len(listing) == len(objects[ResourceKind.TASK])
    assert engine.list_tasks_changed(digest) == (None, digest)
    changed, other = engine.list_tasks_changed(digest)
    assert changed is not None and other != digest
