"""Write semantics and bad input with a fake engine writer (writes cannot hurt the cluster or lie, docs/safety.md):
reserved ``com.docker.stack.*`` labels (API017, and stack write for creates), ``If-Match`` judged by the
object it writes (a tag survives task changes, not a spec change; API016 for a malformed header), deeply
nested bodies (API015) and env names with NUL (API006) refused before any engine call."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit.acl.test_enforcement_writes import as_user, refused
from tests.unit.acl.test_enforcement_writes import start as start_acl
from tests.unit.objects import CFG_SHOP, NODE_WORKER, SVC_WEB, TASK_WEB_1, cluster
from tests.unit.support import Harness, build_harness
from tests.unit.writes.test_write_core import FakeWriter

STACK = "com.docker.stack.namespace"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture
def lab() -> Iterator[tuple[FlaskClient, FakeWriter, Harness]]:
    harness = build_harness(FakeEngine(cluster()), operations_level=3)
    harness.start()
    writer = FakeWriter(harness)
    harness.runtime.writer = writer   # type: ignore[assignment]
    try:
        yield harness.app.test_client(), writer, harness
    finally:
        harness.stop()


def code(response: Any) -> str:
    body = response.get_json()
    assert response.mimetype == "application/problem+json", response.get_data(as_text=True)
    return str(body["code"])


def change_task(harness: Harness) -> None:
    """A task of the service changes state, as the watcher would apply it (the service's spec does not)."""
    cache = harness.cache
    entry = cache.get(ResourceKind.TASK, TASK_WEB_1)
    assert entry is not None
    raw = copy.deepcopy(entry.raw)
    raw["Status"] = {**raw["Status"], "State": "failed", "Message": "moved on"}
    raw["Version"] = {"Index": raw["Version"]["Index"] + 7}
    cache.apply_inspect(ResourceKind.TASK, TASK_WEB_1, raw, cache.write_token())


def change_spec(harness: Harness, labels: dict[str, str]) -> None:
    """Another writer changed the service's labels (the engine's state, applied to the cache)."""
    cache = harness.cache
    entry = cache.get(ResourceKind.SERVICE, SVC_WEB)
    assert entry is not None
    raw = copy.deepcopy(entry.raw)
    raw["Spec"]["Labels"] = {**raw["Spec"].get("Labels", {}), **labels}
    raw["Version"] = {"Index": raw["Version"]["Index"] + 1}
    cache.apply_inspect(ResourceKind.SERVICE, SVC_WEB, raw, cache.write_token())


# ---------------------------------------------------------------------------------------------- reserved labels
def test_a_stack_label_change_is_refused_on_every_label_write(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, writer, _ = lab
    labels = client.get(f"/services/{SVC_WEB}/labels").get_json()["labels"]
    assert labels[STACK] == "shop"
    moved = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({STACK: "ops"}), content_type=MERGE)
    assert moved.status_code == 400 and code(moved) == "API017" and moved.get_json()["labels"] == [STACK]
    dropped = client.put(f"/services/{SVC_WEB}/labels", json={"tier": "web"})          # would leave the stack
    assert dropped.status_code == 400 and code(dropped) == "API017"
    removed = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps([{"op": "remove", "path": f"/{STACK}"}]),
                           content_type=JSON_PATCH)
    assert code(removed) == "API017"
    other = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"com.docker.stack.image": "x"}),
                         content_type=MERGE)
    assert code(other) == "API017"
    config = client.patch(f"/configs/{CFG_SHOP}/labels", data=json.dumps({STACK: None}), content_type=MERGE)
    assert code(config) == "API017"
    node = client.put(f"/nodes/{NODE_WORKER}/labels", json={STACK: "shop"})
    assert code(node) == "API017"
    assert [call for call in writer.calls if call[0] == "update"] == []
    kept = client.put(f"/services/{SVC_WEB}/labels", json={"labels": {**labels, "tier": "web"}})   # sent back as is
    assert kept.status_code == 200, kept.get_data(as_text=True)
    assert kept.get_json()["labels"] == {**labels, "tier": "web"}


def test_a_create_into_a_stack_needs_write_on_that_stack() -> None:
    harness, writer = start_acl()
    client = harness.app.test_client()
    try:
        body = {"name": "new_cfg", "data": "aGk=", "labels": {STACK: "shop"}}
        # group ops: write on config:* and stack:shop; frank: write on service:* only
        assert client.post("/configs", json=body, headers=as_user("gina", "ops")).status_code == 201
        refused(client.post("/configs", json={**body, "labels": {STACK: "other"}}, headers=as_user("gina", "ops")),
                "stack:other")
        refused(client.post("/networks", json={"name": "n1", "labels": {STACK: "shop"}}, headers=as_user("frank")),
                "network:*")
        assert [call[1][1] for call in writer.calls if call[0] == "create"] == ["new_cfg"]
    finally:
        harness.stop()


# ---------------------------------------------------------------------------------------------- If-Match
def test_a_sub_resource_tag_holds_while_tasks_change(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, _, harness = lab
    etag = client.get(f"/services/{SVC_WEB}/labels").headers["ETag"]
    detail_before = client.get(f"/services/{SVC_WEB}").headers["ETag"]
    change_task(harness)
    assert client.get(f"/services/{SVC_WEB}").headers["ETag"] != detail_before     # the detail embeds tasks
    answer = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"tier": "web"}), content_type=MERGE,
                          headers={"If-Match": etag})
    assert answer.status_code == 200, answer.get_data(as_text=True)


def test_a_detail_tag_holds_while_tasks_change_not_after_a_spec_change(
        lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, writer, harness = lab
    etag = client.get(f"/services/{SVC_WEB}").headers["ETag"]
    vnd = client.get(f"/services/{SVC_WEB}", headers={"Accept": "application/vnd.service.v1+json"}).headers["ETag"]
    labels_tag = client.get(f"/services/{SVC_WEB}/labels").headers["ETag"]
    change_task(harness)
    for tag in (etag, vnd):
        answer = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 2}, headers={"If-Match": tag})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        writer.last = None      # the engine keeps the cached spec: the write changed nothing the tags showed
    change_spec(harness, {"someone": "else"})
    for tag in (etag, labels_tag, f'"nope", {etag}'):
        stale = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"tier": "x"}), content_type=MERGE,
                             headers={"If-Match": tag})
        assert stale.status_code == 412 and code(stale) == "SVC001"
    assert len([call for call in writer.calls if call[0] == "update"]) == 2


def test_a_write_answer_tag_chains_and_weak_tags_never_hold(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, _, _ = lab
    first = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 2})
    assert first.status_code == 200
    tag = first.headers["ETag"]
    weak = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 3}, headers={"If-Match": "W/" + tag})
    assert weak.status_code == 412
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 3}, headers={"If-Match": tag}).status_code == 200


@pytest.mark.parametrize("header", ['"a", *', "*, *", "abc", '"a" "b"', "W/abc", ",", '"a'])
def test_a_malformed_if_match_is_api016_before_the_body(lab: tuple[FlaskClient, FakeWriter, Harness],
                                                        header: str) -> None:
    client, writer, _ = lab
    answer = client.put(f"/services/{SVC_WEB}/scale", data=b"not json", headers={"If-Match": header})
    assert answer.status_code == 400 and code(answer) == "API016"
    assert writer.calls == []


def test_star_alone_holds_for_an_existing_object(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, _, _ = lab
    assert client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 1}, headers={"If-Match": "*"}).status_code == 200
    missing = client.put("/services/nope/scale", json={"replicas": 1}, headers={"If-Match": "*"})
    assert missing.status_code == 404


# ---------------------------------------------------------------------------------------------- bodies
@pytest.mark.parametrize("depth", [65, 5_000, 150_000])
def test_deeply_nested_bodies_are_api015(lab: tuple[FlaskClient, FakeWriter, Harness], depth: int) -> None:
    client, writer, _ = lab
    nested = b"[" * depth + b"]" * depth
    put = client.put(f"/services/{SVC_WEB}/env", data=b'{"env": ' + nested + b"}")
    assert put.status_code == 400 and code(put) == "API015"
    patch = client.patch(f"/services/{SVC_WEB}/env", data=nested, content_type=JSON_PATCH)
    assert patch.status_code == 400 and code(patch) == "API015"
    create = client.post("/configs", data=b'{"name": "x", "data": "aGk=", "labels": ' + b'{"a":' * depth + b"1"
                         + b"}" * depth + b"}")
    assert create.status_code == 400 and code(create) == "API015"
    assert writer.calls == []


def test_sixty_four_levels_are_accepted_as_json(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, writer, _ = lab
    body = b'{"env": ' + b'{"a":' * 62 + b'"x"' + b"}" * 62 + b"}"     # 64 levels: decoded, refused by the check
    answer = client.put(f"/services/{SVC_WEB}/env", data=body)
    assert answer.status_code == 400 and code(answer) == "API006"
    assert writer.calls == []


@pytest.mark.parametrize(("env", "fragment"), [
    ({"A\u0000B": "1"}, "control characters"),
    ({"A\nB": "1"}, "control characters"),
    ({"A=B": "1"}, "'='"),
    ({"A": "x\u0000y"}, "NUL"),
])
def test_env_names_and_values_the_engine_cannot_hold_are_refused(lab: tuple[FlaskClient, FakeWriter, Harness],
                                                                 env: dict[str, str], fragment: str) -> None:
    client, writer, _ = lab
    answer = client.put(f"/services/{SVC_WEB}/env", json=env)
    assert answer.status_code == 400 and code(answer) == "API006"
    assert fragment in answer.get_json()["detail"] and "\u0000" not in answer.get_json()["field"]
    patched = client.patch(f"/services/{SVC_WEB}/env", data=json.dumps(env), content_type=MERGE)
    assert code(patched) == "API006"
    assert writer.calls == []


def test_a_sub_resource_write_answer_carries_the_tag_of_its_url(lab: tuple[FlaskClient, FakeWriter, Harness]) -> None:
    client, _, _ = lab
    first = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"tier": "a"}), content_type=MERGE)
    assert first.status_code == 200
    assert first.headers["ETag"] == client.get(f"/services/{SVC_WEB}/labels").headers["ETag"]   # a GET's bytes
    chained = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"tier": "b"}), content_type=MERGE,
                           headers={"If-Match": first.headers["ETag"]})
    assert chained.status_code == 200, chained.get_data(as_text=True)
    stale = client.patch(f"/services/{SVC_WEB}/labels", data=json.dumps({"tier": "c"}), content_type=MERGE,
                         headers={"If-Match": first.headers["ETag"]})
    assert stale.status_code == 412

