"""resources/list, resources/templates/list and resources/read on the synthetic cluster: every kind reads as
its REST detail does, hidden and absent objects give the same error, secrets carry no data, tasks are
enriched, configs carry their base64 data, names resolve to the object, unknown URIs are not found."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.logs.lines import LogLine
from app.logs.page import Selection
from app.logs.timestamps import parse_rfc3339
from app.mcp import resource_read
from app.mcp.registry import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY
from tests.unit import objects as o
from tests.unit.mcp.test_resources_support import acl_app, call, call_error, read_json, rest_headers
from tests.unit.support import Harness

__all__ = ["acl_app"]

DETAILS = {
    f"service://nodes/{o.NODE_WORKER}": f"/nodes/{o.NODE_WORKER}",
    f"service://services/{o.SVC_WEB}": f"/services/{o.SVC_WEB}",
    f"service://tasks/{o.TASK_WEB_1}": f"/tasks/{o.TASK_WEB_1}",
    "service://stacks/shop": "/stacks/shop",
    f"service://configs/{o.CFG_SHOP}": f"/configs/{o.CFG_SHOP}",
    f"service://secrets/{o.SEC_SHOP}": f"/secrets/{o.SEC_SHOP}",
    f"service://networks/{o.NET_SHOP}": f"/networks/{o.NET_SHOP}",
    f"service://volumes/{o.VOL_SHOP}": f"/volumes/{o.VOL_SHOP}",
    "service://cluster": "/cluster",
    "service://history": "/history?limit=100",
    "service://recommendations": "/recommendations?limit=1000",
}


def rest(harness: Harness, user: str, path: str) -> Any:
    response = harness.app.test_client().get(path, headers=rest_headers(user))
    assert response.status_code == 200, (path, response.status_code)
    return response.get_json()


def test_the_static_resources_are_listed_with_their_media_type(acl_app: Harness) -> None:
    listed = call(acl_app, "root", "resources/list", {})["resources"]
    assert [r["uri"] for r in listed] == ["service://cluster", "service://history", "service://recommendations"]
    assert all(r["mimeType"] == "application/json" and r["name"] and r["description"] for r in listed)


def test_the_nine_templates_are_listed(acl_app: Harness) -> None:
    templates = call(acl_app, "root", "resources/templates/list", {})["resourceTemplates"]
    assert sorted(t["uriTemplate"] for t in templates) == sorted([
        "service://nodes/{id}", "service://services/{id}", "service://services/{id}/logs", "service://tasks/{id}",
        "service://stacks/{name}", "service://configs/{id}", "service://secrets/{id}", "service://networks/{id}",
        "service://volumes/{name}"])
    assert all(t["mimeType"] == "application/json" and t["name"] and t["description"] for t in templates)
    assert len({t["name"] for t in templates}) == 9


@pytest.mark.parametrize("uri", sorted(DETAILS))
def test_every_resource_reads_as_its_rest_representation(acl_app: Harness, uri: str) -> None:
    assert read_json(acl_app, "root", uri) == rest(acl_app, "root", DETAILS[uri])


@pytest.mark.parametrize("uri", [f"service://services/{o.SVC_WEB}", "service://stacks/shop", "service://history",
                                 f"service://tasks/{o.TASK_WEB_2}"])
def test_a_restricted_reader_gets_the_narrowed_rest_body(acl_app: Harness, uri: str) -> None:
    path = DETAILS.get(uri) or uri.replace("service:/", "")
    assert read_json(acl_app, "alice", uri) == rest(acl_app, "alice", path)


HIDDEN = [("alice", f"service://services/{o.SVC_MONITOR}"), ("alice", f"service://nodes/{o.NODE_MANAGER}"),
          ("alice", f"service://secrets/{o.SEC_OTHER}"), ("alice", "service://volumes/scratch"),
          ("alice", f"service://tasks/{o.TASK_MON_DOWN}"), ("alice", f"service://configs/{o.CFG_OTHER}"),
          ("alice", f"service://networks/{o.NET_INGRESS}"), ("bob", "service://stacks/shop"),
          ("bob", f"service://services/{o.SVC_DB}/logs")]


@pytest.mark.parametrize(("user", "uri"), HIDDEN)
def test_hidden_and_absent_objects_give_the_same_error(acl_app: Harness, user: str, uri: str) -> None:
    hidden = call_error(acl_app, user, "resources/read", {"uri": uri})
    absent_uri = uri.replace(uri.split("/")[3], "nosuchobject")
    absent = call_error(acl_app, user, "resources/read", {"uri": absent_uri})
    assert hidden.code == absent.code == RESOURCE_NOT_FOUND_LEGACY
    assert hidden.message == f"Resource not found: {uri}" and hidden.data == {"uri": uri}
    assert absent.message == f"Resource not found: {absent_uri}" and absent.data == {"uri": absent_uri}
    if not uri.endswith("/logs"):
        read_json(acl_app, "root", uri)   # it exists


def test_the_modern_revision_answers_not_found_as_invalid_params(acl_app: Harness) -> None:
    error = call_error(acl_app, "alice", "resources/read", {"uri": f"service://services/{o.SVC_MONITOR}"},
                       version="2026-07-28")
    assert error.code == INVALID_PARAMS


def test_cluster_wide_documents_need_a_grant(acl_app: Harness) -> None:
    for uri in ("service://cluster", "service://history", "service://recommendations"):
        assert call_error(acl_app, "nobody", "resources/read", {"uri": uri}).code == RESOURCE_NOT_FOUND_LEGACY
    assert read_json(acl_app, "bob", "service://cluster")["serviceCount"] == 3


def test_a_secret_is_read_without_its_data(acl_app: Harness) -> None:
    result = call(acl_app, "root", "resources/read", {"uri": f"service://secrets/{o.SEC_SHOP}"})
    text = result["contents"][0]["text"]
    assert o.SECRET_DATA not in text
    secret = json.loads(text)["secret"]
    assert secret["Spec"]["Name"] == "shop_db_password" and "Data" not in secret["Spec"]


def test_a_config_carries_its_base64_data(acl_app: Harness) -> None:
    config = read_json(acl_app, "root", f"service://configs/{o.CFG_SHOP}")["config"]
    assert config["Spec"]["Data"] == o.CONFIG_DATA


def test_a_task_is_enriched_with_service_name_and_node_hostname(acl_app: Harness) -> None:
    body = read_json(acl_app, "root", f"service://tasks/{o.TASK_WEB_2}")
    assert body["task"]["ServiceName"] == "shop_web_api" and body["task"]["NodeHostname"] == "worker-1"
    assert body["service"]["name"] == "shop_web_api" and body["node"]["hostname"] == "worker-1"
    hidden_node = read_json(acl_app, "alice", f"service://tasks/{o.TASK_WEB_1}")   # on manager-1: not alice's
    assert hidden_node["task"]["ServiceName"] == "shop_web_api" and hidden_node["task"]["NodeHostname"] == ""


def test_a_stack_holds_its_members(acl_app: Harness) -> None:
    stack = read_json(acl_app, "root", "service://stacks/shop")["stack"]
    assert sorted(s["Spec"]["Name"] for s in stack["services"]) == ["shop_db", "shop_web_api"]
    assert [c["ID"] for c in stack["configs"]] == [o.CFG_SHOP] and [v["Name"] for v in stack["volumes"]] == [o.VOL_SHOP]


def test_a_name_reads_as_the_id(acl_app: Harness) -> None:
    for by_name, by_id in (("service://services/shop_db", f"service://services/{o.SVC_DB}"),
                           ("service://nodes/worker-1", f"service://nodes/{o.NODE_WORKER}"),
                           ("service://configs/shop_nginx", f"service://configs/{o.CFG_SHOP}"),
                           ("service://networks/shop_default", f"service://networks/{o.NET_SHOP}")):
        assert read_json(acl_app, "root", by_name) == read_json(acl_app, "root", by_id)
    # a hidden object's name is as unknown as a missing one
    assert call_error(acl_app, "alice", "resources/read", {"uri": "service://services/monitor"}).code \
        == RESOURCE_NOT_FOUND_LEGACY


def test_a_task_is_named_by_its_id_only(acl_app: Harness) -> None:
    error = call_error(acl_app, "root", "resources/read", {"uri": "service://tasks/shop_db.1"})
    assert error.code == RESOURCE_NOT_FOUND_LEGACY


@pytest.mark.parametrize("uri", ["http://cluster", "service://", "service://clusters", "service://widgets/1",
                                 f"service://services/{o.SVC_WEB}/tasks", f"service://nodes/{o.NODE_WORKER}/logs",
                                 "service://services/", f"service://services/{o.SVC_WEB}/logs/x",
                                 "service://services/a%2Fb", "x" * 2000])
def test_unknown_uri_shapes_are_not_found(acl_app: Harness, uri: str) -> None:
    error = call_error(acl_app, "root", "resources/read", {"uri": uri})
    assert error.code == RESOURCE_NOT_FOUND_LEGACY


@pytest.mark.parametrize("params", [{}, {"uri": ""}, {"uri": 7}])
def test_a_missing_uri_is_invalid_params(acl_app: Harness, params: dict[str, Any]) -> None:
    assert call_error(acl_app, "root", "resources/read", params).code == INVALID_PARAMS


def test_the_logs_uri_reads_the_last_100_lines_and_the_cursor(acl_app: Harness,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    stamps = ["2026-01-01T00:00:01.000000001Z", "2026-01-01T00:00:02.000000005Z"]
    lines = [LogLine(parse_rfc3339(stamp), "stdout", f"line {i}") for i, stamp in enumerate(stamps)]

    def fake_read(engine: object, targets: list[Any], query: Any) -> Selection:
        asked.append((targets, query))
        return Selection(lines, False, "2026-01-01T00:00:02.000000006Z")

    monkeypatch.setattr(resource_read, "read_once", fake_read)
    body = read_json(acl_app, "alice", "service://services/shop_db/logs")
    ((targets, query),) = asked
    assert [(t.collection, t.object_id) for t in targets] == [("services", o.SVC_DB)] and query.limit == 100
    assert [line["message"] for line in body["lines"]] == ["line 0", "line 1"]
    assert body["cursor"] == "2026-01-01T00:00:02.000000006Z" and set(body) == {"lines", "cursor"}
    hidden = call_error(acl_app, "alice", "resources/read", {"uri": f"service://services/{o.SVC_MONITOR}/logs"})
    assert hidden.code == RESOURCE_NOT_FOUND_LEGACY and len(asked) == 1
