"""The response memo (app.http.response_memo): a repeated JSON read is answered from the last answer's
bytes, exactly as Flask would answer it, until the cache changes; everything else goes the long way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.http import response_memo
from app.http.response_memo import ResponseMemo
from app.resources import ResourceKind
from app.runtime import runtime_of
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness, wait_until

DETAIL = f"/services/{o.SVC_WEB}"
READS = ["/services", DETAIL, "/nodes", f"/nodes/{o.NODE_MANAGER}", "/tasks?limit=2", "/tasks?limit=1&offset=1",
         "/services?sort=name&dir=desc", '/tasks?filter=state%20%3D%3D%20%22running%22', "/networks", "/configs",
         f"/services/{o.SVC_WEB}/tasks", "/stacks"]
PER_REQUEST = {"Request-Id"}


def memo_of(client: FlaskClient) -> ResponseMemo:
    memo = client.application.wsgi_app
    assert isinstance(memo, ResponseMemo)
    return memo


def headers_of(response: TestResponse) -> dict[str, str]:
    return {name: value for name, value in response.headers.items() if name not in PER_REQUEST}


@pytest.mark.parametrize("path", READS)
def test_a_memoised_answer_is_the_answer_flask_makes(client: FlaskClient, path: str) -> None:
    memo = memo_of(client)
    memo.clear()
    hits = memo.hits
    computed = client.get(path)                        # made the long way, and kept
    remembered = client.get(path)
    assert memo.hits == hits + 1, "the second read was computed again"
    assert remembered.status_code == computed.status_code == 200
    assert remembered.get_data() == computed.get_data()
    assert headers_of(remembered) == headers_of(computed)
    assert remembered.headers["Cache-Sequence"] == str(runtime_of(client.application).cache.freshness.seq)


def test_each_memoised_answer_gets_its_own_request_id_or_echoes_the_callers(client: FlaskClient) -> None:
    client.get(DETAIL)
    first, second = client.get(DETAIL), client.get(DETAIL)
    assert first.headers["Request-Id"] != second.headers["Request-Id"]
    assert len(first.headers["Request-Id"]) == 32
    assert client.get(DETAIL, headers={"Request-Id": "trace-7"}).headers["Request-Id"] == "trace-7"
    assert client.get(DETAIL, headers={"Request-Id": "bad\x01id"}).headers["Request-Id"] != "bad\x01id"


def test_a_cache_change_clears_the_memo(harness: Harness) -> None:
    client = harness.app.test_client()
    memo = memo_of(client)
    before = client.get("/configs")
    assert client.get("/configs").get_data() == before.get_data()
    harness.engine.objects[ResourceKind.CONFIG]["cfgnew"] = o.config("cfgnew", "new_config")
    harness.engine.emit("config", "create", "cfgnew")
    wait_until(lambda: harness.cache.get(ResourceKind.CONFIG, "cfgnew"), 2, message="the new config")
    hits = memo.hits
    after = client.get("/configs")
    assert memo.hits == hits, "an answer from before the change was served"
    assert b"new_config" in after.get_data() and after.headers["ETag"] != before.headers["ETag"]
    assert int(after.headers["Cache-Sequence"]) > int(before.headers["Cache-Sequence"])


@pytest.mark.parametrize("headers", [{"If-None-Match": "{etag}"}, {"Range": "items=0-0"}, {"Origin": "http://x.test"},
                                     {"Accept": "text/html"}, {"Shoal-Fragment": "rows"}])
def test_requests_whose_headers_change_the_answer_go_the_long_way(client: FlaskClient,
                                                                  headers: dict[str, str]) -> None:
    memo = memo_of(client)
    etag = client.get("/services").headers["ETag"]
    client.get("/services")
    sent = {name: value.replace("{etag}", etag) for name, value in headers.items()}
    hits = memo.hits
    for _ in range(2):
        answer = client.get("/services", headers=sent)
        assert answer.status_code in (200, 206, 304)
    assert memo.hits == hits
    if "If-None-Match" in headers:
        assert answer.status_code == 304


def test_head_and_writes_are_not_memoised(client: FlaskClient) -> None:
    memo = memo_of(client)
    client.get(DETAIL)
    hits = memo.hits
    head = client.head(DETAIL)
    assert head.status_code == 200 and head.get_data() == b"" and memo.hits == hits


def test_problems_and_stores_of_no_store_answers_are_not_kept(client: FlaskClient) -> None:
    memo = memo_of(client)
    for _ in range(2):
        assert client.get("/services?filter=%28").status_code == 400
        assert client.get("/-/health").status_code == 200
        assert client.get("/services/nope").status_code == 404
    hits = memo.hits
    client.get("/services?filter=%28")
    assert memo.hits == hits


def test_memoised_reads_are_counted_in_the_request_metrics(client: FlaskClient) -> None:
    def served() -> float:
        text = client.get("/-/metrics").get_data(as_text=True)
        line = next((x for x in text.splitlines() if x.startswith("shoal_http_requests_total{")
                     and 'route="/services/{id}"' in x and 'method="GET"' in x and 'status="200"' in x), None)
        return float(line.rsplit(" ", 1)[1]) if line else 0.0

    client.get(DETAIL)
    before = served()
    for _ in range(3):
        client.get(DETAIL)
    assert served() == before + 3


def test_a_write_can_quote_the_tag_of_a_memoised_read(harness: Harness) -> None:
    """The memo re-issues the tag (app.http.issued_tags) as the long way does: an If-Match with it is
    a tag this service issued for the object's current state."""
    from app.http.issued_tags import issued_tags

    client = harness.app.test_client()
    client.get(DETAIL)
    etag = client.get(DETAIL).headers["ETag"]
    tags = issued_tags(harness.app)
    tags._shown.pop(etag)   # dropped meanwhile (10,000 other tags issued): the next hit issues it again
    client.get(DETAIL)
    assert tags.shows_current(etag, harness.cache.get(ResourceKind.SERVICE, o.SVC_WEB))


def test_the_memo_is_bounded_in_answers_and_bytes(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = memo_of(client)
    memo.clear()
    monkeypatch.setattr(response_memo, "MAX_ENTRIES", 3)
    for offset in range(6):
        client.get(f"/tasks?limit=1&offset={offset}")
    assert len(memo._answers) == 3
    monkeypatch.setattr(response_memo, "MAX_BYTES", 1)
    client.get("/services")
    assert len(memo._answers) == 0 and memo._bytes == 0


def test_a_policy_reload_clears_the_memo(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    client = harness.app.test_client()
    memo = memo_of(client)
    client.get("/services")
    client.get("/services")
    hits = memo.hits
    source: Any = harness.runtime.policy
    monkeypatch.setattr(source, "_policy", object())   # what a reload does: another policy object
    client.get("/services")
    assert memo.hits == hits


@pytest.fixture
def proxied() -> Iterator[Harness]:
    built = build_harness(FakeEngine(cluster()), auth_mode="headers", headers_subject="X-User",
                          headers_groups="X-Groups", trusted_proxies=("127.0.0.1/32",))
    built.start()
    yield built
    built.stop()


def test_behind_an_authenticating_proxy_the_identity_is_part_of_the_key(proxied: Harness) -> None:
    client = proxied.app.test_client()
    memo = memo_of(client)
    alice = {"X-User": "alice", "X-Groups": "ops"}
    first = client.get("/services", headers=alice)
    hits = memo.hits
    again = client.get("/services", headers=alice)
    assert memo.hits == hits + 1 and again.get_data() == first.get_data()
    assert "Authorization" in again.headers["Vary"]
    client.get("/services", headers={"X-User": "bob"})        # another caller: computed for them
    assert memo.hits == hits + 1
    client.get("/services", headers={"X-User": "alice", "X-Groups": "dev"})   # other groups: other grants
    assert memo.hits == hits + 1


def test_a_refused_caller_is_refused_once_per_request_and_never_served(proxied: Harness,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    client = proxied.app.test_client()
    memo = memo_of(client)
    client.get("/services", headers={"X-User": "alice"})
    client.get("/services", headers={"X-User": "alice"})
    hits = memo.hits
    with caplog.at_level("INFO"):
        for _ in range(3):
            assert client.get("/services").status_code == 401
            assert client.get("/services", headers={"X-User": "alice"},
                              environ_base={"REMOTE_ADDR": "10.9.9.9"}).status_code == 401
    assert memo.hits == hits
    refusals = [r for r in caplog.records if "authentication refused" in r.getMessage()]
    assert len(refusals) == 6, [r.getMessage() for r in refusals]


def test_health_probes_are_not_authenticated_by_the_memo(proxied: Harness, caplog: pytest.LogCaptureFixture) -> None:
    client = proxied.app.test_client()
    with caplog.at_level("INFO"):
        for _ in range(3):
            assert client.get("/-/health").status_code == 200
    assert not [r for r in caplog.records if "authentication refused" in r.getMessage()]


def test_the_health_probe_is_memoised_until_its_status_changes(unsynced: Harness) -> None:
    client = unsynced.app.test_client()
    memo = memo_of(client)
    before = client.get("/-/health")
    assert before.get_json()["status"] == "error" and before.headers["Cache-Control"] == "no-store"
    hits = memo.hits
    again = client.get("/-/health")
    assert memo.hits == hits + 1 and again.get_data() == before.get_data()
    assert again.headers["Cache-Control"] == "no-store" and "Cache-Sequence" not in again.headers
    unsynced.start()
    try:
        after = client.get("/-/health")
        assert after.get_json()["status"] == "ok"
        assert client.get("/-/health").get_data() == after.get_data()
    finally:
        unsynced.stop()


def test_a_change_while_a_read_waits_its_turn_is_not_served_from_before(harness: Harness) -> None:
    """A memoised read waits for the admission gate like any other; a change batch landing meanwhile
    makes it computed again."""
    import gevent

    from app.http.admission import gate_of

    client = harness.app.test_client()
    memo = memo_of(client)
    client.get("/configs")
    client.get("/configs")
    gate = gate_of(harness.app)
    ticket = gate.acquire()               # the gate busy: the next read waits
    answers: list[TestResponse] = []
    waiting = gevent.spawn(lambda: answers.append(client.get("/configs")))
    gevent.sleep(0.05)
    harness.engine.objects[ResourceKind.CONFIG]["cfglate"] = o.config("cfglate", "late_config")
    harness.engine.emit("config", "create", "cfglate")
    wait_until(lambda: harness.cache.get(ResourceKind.CONFIG, "cfglate"), 2, message="the new config")
    hits = memo.hits
    ticket.release()
    waiting.join(5)
    assert answers and b"late_config" in answers[0].get_data()
    assert memo.hits == hits


def test_the_memoised_probe_never_waits_at_the_gate(client: FlaskClient) -> None:
    from app.http.admission import gate_of

    memo = memo_of(client)
    client.get("/-/health")
    gate = gate_of(client.application)
    ticket = gate.acquire()   # a request computing: a gated read would wait, a probe answers
    try:
        hits = memo.hits
        assert client.get("/-/health").status_code == 200 and memo.hits == hits + 1
    finally:
        ticket.release()


def test_memoised_reads_keep_the_lane_of_their_view(client: FlaskClient) -> None:
    """A detail waits in the gate's light lane, a list in the other, as on the long way: a crowd of list
    readers does not make a detail wait behind all of them."""
    memo = memo_of(client)
    memo.clear()
    client.get(DETAIL)
    client.get("/services")
    lanes = {key[1]: answer.light for key, answer in memo._answers.items()}
    assert lanes == {DETAIL: True, "/services": False}
