"""Idempotency-Key: the key's syntax, fingerprints, the two stores (expiry, bounds, durability), and the HTTP
flow over a fake engine writer (replay, 422, 409 in flight, 504 then a pinned retry, 503 frees the key)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest
from flask.testing import FlaskClient

from app.engine.writes import WriteFailure
from app.errors import ProblemError
from app.http.idempotency import REPLAYED, fingerprint, parse_key
from app.resources import ResourceKind
from app.store.idempotency import KeyRecord, MemoryKeys, SqliteKeys, with_outcome
from tests.unit.objects import SVC_WEB
from tests.unit.writes.test_write_core import FakeWriter, make


# ---------------------------------------------------------------------------------------------- the key
@pytest.mark.parametrize(("header", "key"), [('"abc"', "abc"), ("abc", "abc"), ('"a\\"b"', 'a"b'),
                                             (" k-1 ", "k-1"), ('"' + "x" * 255 + '"', "x" * 255)])
def test_keys_are_sf_strings_or_bare_values(header: str, key: str) -> None:
    assert parse_key(header) == key


@pytest.mark.parametrize("header", ['""', '"' + "x" * 256 + '"', '"abc', "caf\u00e9", "a\tb", ""])
def test_bad_keys_are_wrt003(header: str) -> None:
    with pytest.raises(ProblemError) as caught:
        parse_key(header)
    assert caught.value.code == "API019" and caught.value.status == 400


def test_fingerprints_cover_identity_method_target_and_body() -> None:
    base = fingerprint("alice", "PUT", "/services/x/scale", b'{"replicas": 1}')
    assert base == fingerprint("alice", "PUT", "/services/x/scale", b'{"replicas": 1}')
    others = {fingerprint("bob", "PUT", "/services/x/scale", b'{"replicas": 1}'),
              fingerprint("alice", "POST", "/services/x/scale", b'{"replicas": 1}'),
              fingerprint("alice", "PUT", "/services/y/scale", b'{"replicas": 1}'),
              fingerprint("alice", "PUT", "/services/x/scale", b'{"replicas": 2}'),
              fingerprint("alicePUT", "", "/services/x/scale", b'{"replicas": 1}')}   # no ambiguous joins
    assert base not in others and len(others) == 5


# ---------------------------------------------------------------------------------------------- the stores
def record(key: str, created: float, body: bytes = b"{}") -> KeyRecord:
    return with_outcome(KeyRecord("anonymous", key, "f" * 64, "started", created, "req-" + key), "done",
                        status=200, headers=(("Content-Type", "application/json"),), body=body)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_memory_keys_expire_and_stay_bounded_in_count_and_bytes() -> None:
    clock = Clock()
    keys = MemoryKeys(ttl=60, max_keys=3, max_bytes=10_000, clock=clock)
    for i in range(5):
        keys.put(record(f"k{i}", clock.now))
    assert [keys.get("anonymous", f"k{i}") is not None for i in range(5)] == [False, False, True, True, True]
    clock.now += 61
    assert keys.get("anonymous", "k4") is None
    keys.put(record("big1", clock.now, b"x" * 6000))
    keys.put(record("big2", clock.now, b"x" * 6000))
    assert keys.get("anonymous", "big1") is None and keys.get("anonymous", "big2") is not None


def test_sqlite_keys_survive_a_new_connection_and_expire(tmp_path: Path) -> None:
    path = str(tmp_path / "shoal.db")
    clock = Clock()
    keys = SqliteKeys(path, ttl=60, max_keys=100, clock=clock)
    stored = record("k1", clock.now, b'{"a": 1}')
    keys.put(stored)
    keys.close()
    again = SqliteKeys(path, ttl=60, max_keys=100, clock=clock)   # another process would see it the same way
    assert again.get("anonymous", "k1") == stored
    assert again.get("bob", "k1") is None
    clock.now += 61
    assert again.get("anonymous", "k1") is None
    again.put(record("k2", clock.now))   # a put deletes the expired rows
    rows = sqlite3.connect(path).execute("SELECT key FROM idempotency_keys").fetchall()
    assert rows == [("k2",)]
    again.delete("anonymous", "k2")
    assert again.get("anonymous", "k2") is None
    again.close()


def test_sqlite_keys_drop_the_oldest_past_the_count_and_byte_bounds(tmp_path: Path) -> None:
    clock = Clock()
    keys = SqliteKeys(str(tmp_path / "shoal.db"), ttl=3600, max_keys=10, max_bytes=20_000, clock=clock)
    import app.store.idempotency as module
    every = module.PRUNE_EVERY
    module.PRUNE_EVERY = 1
    try:
        for i in range(15):
            clock.now += 1
            keys.put(record(f"k{i}", clock.now))
        assert keys.get("anonymous", "k4") is None and keys.get("anonymous", "k5") is not None
        for i in range(3):
            clock.now += 1
            keys.put(record(f"big{i}", clock.now, b"x" * 8000))
        assert keys.get("anonymous", "big0") is None and keys.get("anonymous", "big2") is not None
    finally:
        module.PRUNE_EVERY = every
        keys.close()


# ---------------------------------------------------------------------------------------------- over HTTP
@pytest.fixture
def level1() -> Iterator[tuple[FlaskClient, FakeWriter]]:
    yield from make(1)


def scale(client: FlaskClient, replicas: int, key: str | None = "k1") -> Any:
    headers = {"Idempotency-Key": f'"{key}"'} if key else {}
    return client.put(f"/services/{SVC_WEB}/scale", json={"replicas": replicas}, headers=headers)


def updates(writer: FakeWriter) -> list[Any]:
    return [args for name, args in writer.calls if name == "update"]


def test_a_retry_is_replayed_without_a_second_engine_call(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    first = scale(client, 4)
    assert first.status_code == 200 and REPLAYED not in first.headers
    second = scale(client, 4)
    assert second.status_code == 200 and second.headers[REPLAYED] == "true"
    assert second.data == first.data and second.headers["ETag"] == first.headers["ETag"]
    assert second.headers["Content-Type"] == first.headers["Content-Type"]
    assert len(updates(writer)) == 1
    assert scale(client, 4, key="k2").status_code == 200 and len(updates(writer)) == 2   # another key runs


def test_the_same_key_for_another_request_is_422(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    assert scale(client, 4).status_code == 200
    other = scale(client, 5)
    assert other.status_code == 422 and other.get_json()["code"] == "API020"
    assert len(updates(writer)) == 1


def test_problems_are_kept_and_replayed_too(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    writer.fail = WriteFailure("out_of_sequence", "update out of sequence")
    first = scale(client, 4)
    writer.fail = None
    again = scale(client, 4)
    assert first.status_code == again.status_code == 409 and again.headers[REPLAYED] == "true"
    assert again.get_json()["requestId"] == first.get_json()["requestId"]


def test_a_bad_key_is_wrt003_and_nothing_is_written(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    response = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 4},
                          headers={"Idempotency-Key": "x" * 300})
    assert response.status_code == 400 and response.get_json()["code"] == "API019"
    assert writer.calls == []


def test_a_key_in_flight_is_409(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    release = gevent.event.Event()
    entered = gevent.event.Event()
    update = writer.update_spec

    def slow(*args: Any, **kwargs: Any) -> None:
        entered.set()
        release.wait(5)
        update(*args, **kwargs)

    writer.update_spec = slow   # type: ignore[method-assign]
    first = gevent.spawn(scale, client, 4)
    assert entered.wait(5), "the first write never reached the engine"
    busy = scale(client, 4)
    assert busy.status_code == 409 and busy.get_json()["code"] == "API021" and busy.headers["Retry-After"]
    release.set()
    assert first.get(timeout=5).status_code == 200
    assert scale(client, 4).headers[REPLAYED] == "true"


def test_unknown_outcome_is_504_and_the_retry_is_pinned_to_the_first_version(
        level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    writer.fail = WriteFailure("unknown", "no answer from the engine after the request was sent")
    first = scale(client, 4)
    body = first.get_json()
    assert first.status_code == 504 and body["code"] == "ENG005" and body["outcome"] == "unknown"
    assert body["check"] == [f"/services/{SVC_WEB}", f"/history?type=service&resourceId={SVC_WEB}"]
    assert "may have been applied" in body["detail"] and "same Idempotency-Key" in body["detail"]
    runtime = writer.harness.runtime
    assert runtime.audit.pending(ResourceKind.SERVICE, SVC_WEB) == {"identity": "anonymous",
                                                                    "requestId": body["requestId"]}
    version = updates(writer)[0][2]
    # meanwhile the engine applied the first write: the cache's version moved on
    entry = runtime.cache.get(ResourceKind.SERVICE, SVC_WEB)
    assert entry is not None
    moved = {**entry.raw, "Version": {"Index": version + 1}}
    runtime.cache.apply_inspect(ResourceKind.SERVICE, SVC_WEB, moved, runtime.cache.write_token())
    writer.fail = WriteFailure("out_of_sequence", "update out of sequence")
    retry = scale(client, 4)
    assert [call[2] for call in updates(writer)] == [version, version]   # the same base: one can apply
    assert retry.status_code == 409 and body["requestId"] in retry.get_json()["detail"]
    assert all(name != "inspect" for name, _ in writer.calls[:3])        # no "moved by the engine" retry


def test_an_unknown_outcome_without_a_key_warns_that_a_retry_may_apply_twice(
        level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    writer.fail = WriteFailure("unknown", "read timed out")
    body = scale(client, 4, key=None).get_json()
    assert body["code"] == "ENG005" and "may apply it twice" in body["detail"]


def test_an_unavailable_engine_frees_the_key(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    writer.fail = WriteFailure("unavailable", "connection refused")
    assert scale(client, 4).status_code == 503
    writer.fail = None
    retry = scale(client, 4)
    assert retry.status_code == 200 and REPLAYED not in retry.headers and len(updates(writer)) == 2


def test_a_bound_refusal_is_wrt001_and_makes_no_engine_call(level1: tuple[FlaskClient, FakeWriter]) -> None:
    client, writer = level1
    response = scale(client, 1001, key=None)
    assert response.status_code == 400 and response.get_json()["code"] == "API018"
    assert response.get_json()["limit"] == 1000 and updates(writer) == []


def test_an_applied_write_whose_read_back_fails_is_never_told_as_nothing_applied(
        level1: tuple[FlaskClient, FakeWriter]) -> None:
    """503 would free the key and a retry would restart the service a second time."""
    client, writer = level1
    inspect = writer.inspect

    def unreachable(kind: str, object_id: str) -> dict[str, Any]:
        raise WriteFailure("unavailable", "connection refused")

    writer.inspect = unreachable   # type: ignore[method-assign]
    first = client.post(f"/services/{SVC_WEB}/restart", headers={"Idempotency-Key": "r1"})
    body = first.get_json()
    assert first.status_code == 504 and body["code"] == "ENG005" and body["outcome"] == "applied"
    assert "was applied" in body["detail"]
    writer.inspect = inspect   # type: ignore[method-assign]
    writer.fail = WriteFailure("out_of_sequence", "update out of sequence")
    retry = client.post(f"/services/{SVC_WEB}/restart", headers={"Idempotency-Key": "r1"})
    versions = [call[2] for call in updates(writer)]
    assert retry.status_code == 409 and versions == [versions[0], versions[0]]


def test_a_key_left_started_by_a_dead_worker_reruns_pinned(level1: tuple[FlaskClient, FakeWriter]) -> None:
    """kill -9 between the engine call and the answer leaves only the started mark (with its pin)."""
    import json
    import time

    from app.http import idempotency

    client, writer = level1
    body = json.dumps({"replicas": 4}).encode()
    print_ = fingerprint("anonymous", "PUT", f"/services/{SVC_WEB}/scale", body)
    with writer.harness.app.app_context():
        idempotency.keys().put(KeyRecord("anonymous", "crashed", print_, "started", time.time(), "first-request",
                                         pin={"kind": "service", "id": SVC_WEB, "version": 25}))
    response = client.put(f"/services/{SVC_WEB}/scale", data=body, headers={"Idempotency-Key": "crashed"})
    assert response.status_code == 200 and REPLAYED not in response.headers
    assert [call[2] for call in updates(writer)] == [25]   # the pin, not the cached version (20)
    items = client.get(f"/history?type=service&resourceId={SVC_WEB}").get_json()["items"]
    assert items[0]["audit"] == {"identity": "anonymous", "requestId": "first-request"}   # one logical write
