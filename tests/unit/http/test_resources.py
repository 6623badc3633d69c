"""The eight resource kinds over HTTP: collection and detail envelopes, derived fields, cross-references,
secret redaction and the paging headers of lists."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.support import Harness, wait_until

K = ResourceKind
EXPECTED_IDS = {kind: [FakeEngine.key(kind, raw) for raw in raws] for kind, raws in o.cluster().items()}
EXPECTED_IDS[K.STACK] = ["shop"]
DETAIL_PATHS = [f"{kind.spec.path}/{ids[0]}" for kind, ids in EXPECTED_IDS.items()]


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    return shared_client


def ok(response: TestResponse) -> Any:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    return response.get_json()


def links(response: TestResponse) -> dict[str, str]:
    return {rel: target for target, rel in
            re.findall(r'<([^>]*)>\s*;\s*rel="([^"]+)"', response.headers.get("Link", ""))}


def query_of(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def by_id(items: list[dict[str, Any]], key: str = "ID") -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


# --------------------------------------------------------------------------- collections
@pytest.mark.parametrize("kind", list(ResourceKind))
def test_every_list_is_a_json_ld_collection(client: FlaskClient, kind: ResourceKind) -> None:
    response = client.get(kind.spec.path)
    body = ok(response)
    assert body["@context"] == "/api/context.jsonld"
    assert body["@type"] == "Collection"
    assert (body["total"], body["limit"], body["offset"]) == (len(EXPECTED_IDS[kind]), 50, 0)
    assert [item["@id"] for item in body["items"]] == [f"{kind.spec.path}/{i}" for i in EXPECTED_IDS[kind]]
    for item in body["items"]:
        assert list(item)[:2] == ["@id", "@type"]
        assert item["@type"] == kind.spec.jsonld_type
    assert response.headers["Accept-Ranges"] == "items"
    template = f'<{kind.spec.path}/{{{kind.spec.id_placeholder}}}>; rel="item"'
    assert response.headers["Link-Template"] == template


def test_items_are_the_engine_objects(client: FlaskClient) -> None:
    nodes = by_id(ok(client.get("/nodes"))["items"])
    assert nodes[o.NODE_MANAGER]["Description"]["Hostname"] == "manager-1"
    assert nodes[o.NODE_MANAGER]["ManagerStatus"]["Leader"] is True
    assert nodes[o.NODE_DOWN]["Status"]["State"] == "down"
    networks = by_id(ok(client.get("/networks"))["items"], "Id")
    assert networks[o.NET_BRIDGE]["Driver"] == "bridge" and networks[o.NET_BRIDGE]["Scope"] == "local"
    volumes = by_id(ok(client.get("/volumes"))["items"], "Name")
    assert volumes[o.VOL_SHOP]["Labels"] == {o.STACK_LABEL: "shop"}


def test_service_items_count_their_running_tasks(client: FlaskClient) -> None:
    services = by_id(ok(client.get("/services"))["items"])
    assert {sid: item["RunningTasks"] for sid, item in services.items()} == {
        o.SVC_WEB: 2, o.SVC_DB: 1, o.SVC_MONITOR: 1}


def test_task_items_are_enriched_with_service_name_and_node_hostname(client: FlaskClient) -> None:
    tasks = by_id(ok(client.get("/tasks"))["items"])
    web, monitor = tasks[o.TASK_WEB_2], tasks[o.TASK_MON_DOWN]
    assert (web["ServiceName"], web["NodeHostname"]) == ("shop_web_api", "worker-1")
    assert (monitor["ServiceName"], monitor["NodeHostname"]) == ("monitor", "worker-2")
    assert tasks[o.TASK_DB_OLD]["Status"]["Err"] == "task: non-zero exit (137)"


def test_stack_items_list_member_ids(client: FlaskClient) -> None:
    (stack,) = ok(client.get("/stacks"))["items"]
    assert stack == {"@id": "/stacks/shop", "@type": "Stack", "name": "shop",
                     "services": sorted([o.SVC_WEB, o.SVC_DB]), "configs": [o.CFG_SHOP],
                     "secrets": [o.SEC_SHOP], "networks": [o.NET_SHOP], "volumes": [o.VOL_SHOP]}


# --------------------------------------------------------------------------- details
@pytest.mark.parametrize("path", DETAIL_PATHS)
def test_every_detail_is_a_json_ld_envelope_around_the_resource(client: FlaskClient, path: str) -> None:
    kind = K.from_plural(path.split("/")[1])
    assert kind is not None
    body = ok(client.get(path))
    assert body["@context"] == "/api/context.jsonld"
    assert (body["@id"], body["@type"]) == (path, kind.spec.jsonld_type)
    resource = body[kind.spec.detail_key]
    assert (resource["@id"], resource["@type"]) == (path, kind.spec.jsonld_type)


def test_config_detail_lists_the_services_using_it_and_keeps_its_data(client: FlaskClient) -> None:
    body = ok(client.get(f"/configs/{o.CFG_SHOP}"))
    assert body["config"]["Spec"]["Data"] == o.CONFIG_DATA
    assert body["services"] == [{"@id": f"/services/{o.SVC_WEB}", "id": o.SVC_WEB, "name": "shop_web_api"}]


@pytest.mark.parametrize(("path", "expected"), [
    (f"/secrets/{o.SEC_SHOP}", ["shop_db", "shop_web_api"]),
    (f"/secrets/{o.SEC_OTHER}", []),
    (f"/networks/{o.NET_SHOP}", ["shop_db", "shop_web_api"]),
    (f"/networks/{o.NET_INGRESS}", ["monitor"]),
    (f"/networks/{o.NET_BRIDGE}", []),
    (f"/volumes/{o.VOL_SHOP}", ["shop_web_api"]),
    (f"/volumes/{o.VOL_OTHER}", []),
    (f"/configs/{o.CFG_OTHER}", ["monitor"]),
])
def test_referenced_objects_list_their_services_never_null(client: FlaskClient, path: str,
                                                           expected: list[str]) -> None:
    services = ok(client.get(path))["services"]
    assert [service["name"] for service in services] == expected
    for service in services:
        assert service["@id"] == f"/services/{service['id']}"


def test_task_detail_references_its_service_and_node(client: FlaskClient) -> None:
    body = ok(client.get(f"/tasks/{o.TASK_WEB_1}"))
    assert body["task"]["ID"] == o.TASK_WEB_1
    assert (body["task"]["ServiceName"], body["task"]["NodeHostname"]) == ("shop_web_api", "manager-1")
    assert body["service"] == {"@id": f"/services/{o.SVC_WEB}", "id": o.SVC_WEB, "name": "shop_web_api"}
    assert body["node"] == {"@id": f"/nodes/{o.NODE_MANAGER}", "id": o.NODE_MANAGER, "hostname": "manager-1"}


def test_service_detail_lists_its_tasks(client: FlaskClient) -> None:
    body = ok(client.get(f"/services/{o.SVC_WEB}"))
    assert body["service"]["RunningTasks"] == 2
    assert body["tasks"] == [
        {"@id": f"/tasks/{o.TASK_WEB_1}", "id": o.TASK_WEB_1, "name": "shop_web_api.1", "state": "running",
         "desiredState": "running"},
        {"@id": f"/tasks/{o.TASK_WEB_2}", "id": o.TASK_WEB_2, "name": "shop_web_api.2", "state": "running",
         "desiredState": "running"},
    ]


def test_global_service_tasks_are_named_by_node(client: FlaskClient) -> None:
    names = {task["id"]: task["name"] for task in ok(client.get(f"/services/{o.SVC_MONITOR}"))["tasks"]}
    assert names[o.TASK_MON_WORKER] == f"monitor.{o.NODE_WORKER}"


def test_node_detail_lists_the_tasks_on_it(client: FlaskClient) -> None:
    body = ok(client.get(f"/nodes/{o.NODE_WORKER}"))
    assert body["node"]["Description"]["Hostname"] == "worker-1"
    assert {task["id"] for task in body["tasks"]} == {o.TASK_WEB_2, o.TASK_DB_1, o.TASK_MON_WORKER}


def test_stack_detail_holds_its_members_in_full(client: FlaskClient) -> None:
    stack = ok(client.get("/stacks/shop"))["stack"]
    assert stack["name"] == "shop"
    assert [(s["@id"], s["@type"], s["Spec"]["Name"]) for s in stack["services"]] == [
        (f"/services/{o.SVC_DB}", "Service", "shop_db"),
        (f"/services/{o.SVC_WEB}", "Service", "shop_web_api")]
    assert [c["ID"] for c in stack["configs"]] == [o.CFG_SHOP]
    assert [s["ID"] for s in stack["secrets"]] == [o.SEC_SHOP]
    assert [n["Id"] for n in stack["networks"]] == [o.NET_SHOP]
    assert [v["Name"] for v in stack["volumes"]] == [o.VOL_SHOP]
    assert stack["volumes"][0]["@id"] == f"/volumes/{o.VOL_SHOP}"
    assert {s["ID"]: s["RunningTasks"] for s in stack["services"]} == {o.SVC_DB: 1, o.SVC_WEB: 2}


@pytest.mark.parametrize("kind", [K.NODE, K.SERVICE])
def test_task_sublists_are_unpaginated_and_enriched(client: FlaskClient, kind: ResourceKind) -> None:
    parent = o.NODE_WORKER if kind is K.NODE else o.SVC_DB
    response = client.get(f"{kind.spec.path}/{parent}/tasks")
    body = ok(response)
    expected = {K.NODE: {o.TASK_WEB_2, o.TASK_DB_1, o.TASK_MON_WORKER},
                K.SERVICE: {o.TASK_DB_1, o.TASK_DB_OLD}}
    assert {item["ID"] for item in body["items"]} == expected[kind]
    assert body["limit"] == body["total"] == len(expected[kind])
    assert all(item["ServiceName"] and item["NodeHostname"] for item in body["items"])
    assert all(item["@type"] == "Task" for item in body["items"])
    assert body["@id"] == f"{kind.spec.path}/{parent}/tasks"
    assert not {"first", "prev", "next", "last"} & set(links(response))
    assert "Accept-Ranges" not in response.headers
    assert response.headers["Link-Template"] == '</tasks/{id}>; rel="item"'


def test_an_empty_task_sublist_has_limit_zero_and_no_paging_links(harness: Harness) -> None:
    harness.cache.upsert(K.NODE, o.node("n-idle", "idle"))
    response = harness.app.test_client().get("/nodes/n-idle/tasks")
    body = ok(response)
    assert (body["items"], body["total"], body["limit"], body["offset"]) == ([], 0, 0, 0)
    assert "limit=0" not in response.headers.get("Link", "")


# --------------------------------------------------------------------------- secrets
SECRET_EXPOSING_PATHS = ["/secrets", f"/secrets/{o.SEC_SHOP}", "/stacks", "/stacks/shop", "/stacks/shop.json",
                         "/secrets?sort=name", f"/secrets/{o.SEC_SHOP}.json"]


@pytest.mark.parametrize("path", SECRET_EXPOSING_PATHS)
@pytest.mark.parametrize("accept", ["application/json", "application/vnd.service.v1+json"])
def test_secret_data_is_absent_everywhere(client: FlaskClient, path: str, accept: str) -> None:
    response = client.get(path, headers={"Accept": accept})
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert o.SECRET_DATA not in text
    if path.startswith("/secrets"):
        assert '"Data"' not in text


def test_secret_spec_keeps_everything_but_data(client: FlaskClient) -> None:
    secret = ok(client.get(f"/secrets/{o.SEC_SHOP}"))["secret"]
    assert secret["Spec"] == {"Name": "shop_db_password", "Labels": {o.STACK_LABEL: "shop"}}


def test_no_response_of_any_kind_contains_secret_data(client: FlaskClient) -> None:
    paths = [kind.spec.path for kind in ResourceKind] + DETAIL_PATHS + [
        f"/{kind.spec.plural}/{i}" for kind in ResourceKind for i in EXPECTED_IDS[kind]]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
        assert o.SECRET_DATA not in response.get_data(as_text=True), path


# --------------------------------------------------------------------------- paging links
def test_a_middle_page_links_first_prev_next_and_last(client: FlaskClient) -> None:
    response = client.get("/tasks?limit=2&offset=2&sort=state")
    rels = links(response)
    assert {rel: (query_of(url)["offset"], query_of(url)["limit"]) for rel, url in rels.items()
            if rel in ("first", "prev", "next", "last")} == {
        "first": ("0", "2"), "prev": ("0", "2"), "next": ("4", "2"), "last": ("6", "2")}
    for rel in ("first", "prev", "next", "last"):
        assert urlsplit(rels[rel]).path == "/tasks"
        assert query_of(rels[rel])["sort"] == "state"


def test_the_first_page_has_no_prev_and_the_last_no_next(client: FlaskClient) -> None:
    first = links(client.get("/tasks?limit=3"))
    assert "prev" not in first and query_of(first["next"])["offset"] == "3"
    last = links(client.get("/tasks?limit=3&offset=6"))
    assert "next" not in last and query_of(last["prev"])["offset"] == "3"
    assert query_of(last["last"])["offset"] == "6"


def test_a_single_page_has_first_and_last_only(client: FlaskClient) -> None:
    rels = links(client.get("/services"))
    assert "next" not in rels and "prev" not in rels
    assert query_of(rels["first"])["offset"] == query_of(rels["last"])["offset"] == "0"


def test_paging_links_keep_the_discovery_links(client: FlaskClient) -> None:
    rels = links(client.get("/tasks?limit=2"))
    assert {"service-desc", "describedby", "first", "next", "last"} <= set(rels)


# --------------------------------------------------------------------------- versions and live data
@pytest.mark.parametrize("path", ["/services", f"/tasks/{o.TASK_WEB_1}", "/stacks/shop"])
def test_v1_and_latest_json_are_the_same_document(client: FlaskClient, path: str) -> None:
    latest = client.get(path, headers={"Accept": "application/json"})
    pinned = client.get(path, headers={"Accept": "application/vnd.service.v1+json"})
    assert pinned.headers["Content-Type"].startswith("application/vnd.service.v1+json")
    assert pinned.get_json(force=True) == latest.get_json()


def test_v1_fixes_the_top_level_members_of_engine_objects(harness: Harness) -> None:
    raw = o.node("futurenode", "future-1")
    raw["SomeFutureEngineField"] = {"x": 1}
    harness.engine.objects[K.NODE]["futurenode"] = raw
    harness.engine.emit("node", "create", "futurenode")
    wait_until(lambda: harness.cache.get(K.NODE, "futurenode"), 2, message="the new node")
    node = harness.app.test_client().get("/nodes/futurenode").get_json()["node"]
    assert node["Description"]["Hostname"] == "future-1"
    assert "SomeFutureEngineField" not in node


def test_running_task_counts_follow_task_changes(harness: Harness) -> None:
    client = harness.app.test_client()
    assert client.get(f"/services/{o.SVC_WEB}").get_json()["service"]["RunningTasks"] == 2
    harness.engine.objects[K.TASK][o.TASK_WEB_2] = o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2,
                                                          state="failed", version=99)
    harness.engine.emit("container", "die", "c" * 64, **{"com.docker.swarm.task.id": o.TASK_WEB_2})
    wait_until(lambda: client.get(f"/services/{o.SVC_WEB}").get_json()["service"]["RunningTasks"] == 1, 2,
               message="RunningTasks to drop")


def test_a_removed_object_disappears_from_lists_and_details(harness: Harness) -> None:
    client = harness.app.test_client()
    del harness.engine.objects[K.SERVICE][o.SVC_MONITOR]
    harness.engine.emit("service", "remove", o.SVC_MONITOR)
    wait_until(lambda: client.get(f"/services/{o.SVC_MONITOR}").status_code == 404, 2, message="the removal")
    assert o.SVC_MONITOR not in {item["ID"] for item in client.get("/services").get_json()["items"]}
    assert client.get(f"/configs/{o.CFG_OTHER}").get_json()["services"] == []


def test_the_base_path_prefixes_ids_links_and_problem_types(fake_engine: FakeEngine) -> None:
    from tests.unit.support import build_harness

    built = build_harness(fake_engine, base_path="/shoal")
    built.start()
    try:
        client = built.app.test_client()
        response = client.get("/shoal/tasks?limit=2")
        body = ok(response)
        assert body["@context"] == "/shoal/api/context.jsonld"
        assert all(item["@id"].startswith("/shoal/tasks/") for item in body["items"])
        assert response.headers["Link-Template"] == '</shoal/tasks/{id}>; rel="item"'
        assert urlsplit(links(response)["next"]).path == "/shoal/tasks"
        detail = ok(client.get(f"/shoal/tasks/{o.TASK_WEB_1}"))
        assert detail["@id"] == f"/shoal/tasks/{o.TASK_WEB_1}"
        missing = client.get("/shoal/services/nope").get_json()
        assert (missing["type"], missing["instance"], missing["@id"]) == \
            ("about:blank", "/shoal/services/nope", "/shoal/services/nope")
        problem = client.get("/shoal/tasks?filter=(").get_json()
        assert problem["type"] == "/shoal/api/errors/FLT002"
    finally:
        built.stop()


def test_cross_references_carry_the_base_path(fake_engine: FakeEngine) -> None:
    """Every @id is a path the client can follow; under a base path the references need the prefix too."""
    from tests.unit.support import build_harness

    built = build_harness(fake_engine, base_path="/shoal")
    built.start()
    try:
        client = built.app.test_client()
        task = ok(client.get(f"/shoal/tasks/{o.TASK_WEB_1}"))
        config = ok(client.get(f"/shoal/configs/{o.CFG_SHOP}"))
        service = ok(client.get(f"/shoal/services/{o.SVC_WEB}"))
        stack = ok(client.get("/shoal/stacks/shop"))
        references = {
            "task.service": task["service"]["@id"], "task.node": task["node"]["@id"],
            "config.services": config["services"][0]["@id"], "service.tasks": service["tasks"][0]["@id"],
            "stack.services": stack["stack"]["services"][0]["@id"],
        }
        assert {name: ref for name, ref in references.items() if not ref.startswith("/shoal/")} == {}
    finally:
        built.stop()


def test_an_unassigned_task_has_no_node_reference(harness: Harness) -> None:
    raw = o.task("unassigned", o.SVC_WEB, "", slot=3, state="pending")
    harness.engine.objects[K.TASK]["unassigned"] = raw
    wait_until(lambda: harness.cache.get(K.TASK, "unassigned"), 2, message="the polled task")
    body = ok(harness.app.test_client().get("/tasks/unassigned"))
    assert body["node"] is None
    assert body["task"]["NodeHostname"] == ""
    assert body["service"]["name"] == "shop_web_api"
