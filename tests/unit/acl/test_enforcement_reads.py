"""Read enforcement (docs/acl.md) on the synthetic cluster, through the
headers auth mode and an inline policy:

- ``bob`` (group ``ops``): read ``service:monitor`` and ``node:worker-1``;
- ``alice``: read ``stack:shop`` (the stack's services, config, secret, network, volume and their tasks);
- ``carol``: read ``network:shop_default`` and ``service:shop_db`` (a readable object next to hidden ones);
- ``root``: read ``*``; ``nobody``: no grant at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness, wait_until

POLICY = {"grants": [
    {"resources": ["service:monitor", "node:worker-1"], "audience": ["group:ops"], "permissions": ["read"]},
    {"resources": ["stack:shop"], "audience": ["user:alice"], "permissions": ["read"]},
    {"resources": ["network:shop_default", "service:shop_db"], "audience": ["user:carol"], "permissions": ["read"]},
    {"resources": ["*"], "audience": ["user:root"], "permissions": ["read"]},
    {"resources": ["swarm:cluster"], "audience": ["user:dave"], "permissions": ["read"]},
]}
# Names bob may not see anywhere (the monitor service's own engine object names none of them).
HIDDEN_FROM_BOB = ("shop", "manager-1", "worker-2", "tls_cert", "postgres")


@pytest.fixture
def acl_harness() -> Iterator[Harness]:
    built = build_harness(FakeEngine(cluster()), auth_mode="headers", headers_subject="X-User",
                          headers_groups="X-Groups", trusted_proxies=("127.0.0.1/32",),
                          acl_policy=json.dumps(POLICY))
    built.start()
    try:
        yield built
    finally:
        built.stop()


@pytest.fixture
def client(acl_harness: Harness) -> FlaskClient:
    return acl_harness.app.test_client()


def as_user(user: str) -> dict[str, str]:
    return {"X-User": user, "X-Groups": "ops" if user == "bob" else ""}


def get(client: FlaskClient, user: str, url: str, **headers: str) -> TestResponse:
    return client.get(url, headers={**as_user(user), **headers})


def body(client: FlaskClient, user: str, url: str) -> dict[str, Any]:
    response = get(client, user, url)
    assert response.status_code == 200, (url, response.status_code, response.get_data(as_text=True)[:300])
    data = response.get_json()
    assert isinstance(data, dict)
    return data


def names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(item.get("Spec", {}).get("Name") or item.get("name") or item.get("Name") or item["ID"]
                  for item in items)


def assert_denied(response: TestResponse, resource: str) -> None:
    assert response.status_code == 403, response.get_data(as_text=True)[:300]
    problem = response.get_json()
    assert problem["code"] == "ACL001"
    assert problem["resource"] == resource and problem["permission"] == "read"


# ---------------------------------------------------------------------------------------------- lists
def test_lists_show_and_count_only_readable_objects(client: FlaskClient) -> None:
    services = body(client, "bob", "/services")
    assert names(services["items"]) == ["monitor"] and services["total"] == 1
    tasks = body(client, "bob", "/tasks?limit=2")
    assert tasks["total"] == 3 and len(tasks["items"]) == 2       # the three monitor tasks, paged
    assert {item["ServiceID"] for item in tasks["items"]} == {o.SVC_MONITOR}
    assert body(client, "bob", "/nodes")["total"] == 1
    for kind in ("configs", "secrets", "networks", "volumes", "stacks"):
        assert body(client, "bob", f"/{kind}") ["total"] == 0, kind

    assert names(body(client, "alice", "/services?sort=name&dir=desc")["items"]) == ["shop_db", "shop_web_api"]
    assert body(client, "alice", "/tasks")["total"] == 4
    assert body(client, "alice", "/stacks")["total"] == 1
    assert body(client, "alice", "/nodes")["total"] == 0
    for kind in ("configs", "secrets", "networks", "volumes"):
        assert body(client, "alice", f"/{kind}")["total"] == 1, kind

    # search and filter run on the readable objects only; total is post-filter
    assert body(client, "alice", "/services?search=db")["total"] == 1
    assert body(client, "bob", "/services?search=shop")["total"] == 0
    assert body(client, "root", "/services")["total"] == 3


def test_range_and_paging_count_only_readable(client: FlaskClient) -> None:
    response = get(client, "alice", "/tasks", Range="items 0-1")
    assert response.status_code == 206
    assert response.headers["Content-Range"] == "items 0-1/4"
    assert get(client, "alice", "/tasks", Range="items 4-5").status_code == 416


def test_task_items_blank_the_names_of_unreadable_nodes(client: FlaskClient) -> None:
    items = body(client, "bob", "/tasks")["items"]
    hostnames = {item["ID"]: item["NodeHostname"] for item in items}
    assert hostnames == {o.TASK_MON_MANAGER: "", o.TASK_MON_WORKER: "worker-1", o.TASK_MON_DOWN: ""}
    assert {item["ServiceName"] for item in items} == {"monitor"}


# ---------------------------------------------------------------------------------------------- details
@pytest.mark.parametrize(("path", "resource"), [
    (f"/services/{o.SVC_WEB}", f"service:{o.SVC_WEB}"),
    (f"/nodes/{o.NODE_MANAGER}", f"node:{o.NODE_MANAGER}"),
    (f"/tasks/{o.TASK_WEB_1}", f"task:{o.TASK_WEB_1}"),
    ("/stacks/shop", "stack:shop"),
    (f"/configs/{o.CFG_SHOP}", f"config:{o.CFG_SHOP}"),
    (f"/secrets/{o.SEC_SHOP}", f"secret:{o.SEC_SHOP}"),
    (f"/networks/{o.NET_SHOP}", f"network:{o.NET_SHOP}"),
    (f"/volumes/{o.VOL_SHOP}", f"volume:{o.VOL_SHOP}"),
    (f"/services/{o.SVC_WEB}/tasks", f"service:{o.SVC_WEB}"),
    (f"/nodes/{o.NODE_MANAGER}/tasks", f"node:{o.NODE_MANAGER}"),
    (f"/services/{o.SVC_WEB}/env", f"service:{o.SVC_WEB}"),
    (f"/services/{o.SVC_WEB}/update-policy", f"service:{o.SVC_WEB}"),
    (f"/nodes/{o.NODE_MANAGER}/labels", f"node:{o.NODE_MANAGER}"),
    (f"/nodes/{o.NODE_MANAGER}/role", f"node:{o.NODE_MANAGER}"),
    (f"/configs/{o.CFG_SHOP}/labels", f"config:{o.CFG_SHOP}"),
    (f"/secrets/{o.SEC_SHOP}/labels", f"secret:{o.SEC_SHOP}"),
    (f"/services/{o.SVC_WEB}/logs", f"service:{o.SVC_WEB}"),
    (f"/tasks/{o.TASK_WEB_1}/logs", f"task:{o.TASK_WEB_1}"),
    ("/stacks/shop/logs", "stack:shop"),
    (f"/services/{o.SVC_WEB}.atom", f"service:{o.SVC_WEB}"),
])
def test_an_unreadable_object_is_403_acl001_naming_the_key_sent(client: FlaskClient, path: str,
                                                                 resource: str) -> None:
    response = get(client, "bob", path)
    assert_denied(response, resource)
    text = response.get_data(as_text=True)
    assert not [name for name in HIDDEN_FROM_BOB if name in text and name not in path], text


def test_readable_details_and_sub_resources_answer(client: FlaskClient) -> None:
    for path in (f"/services/{o.SVC_MONITOR}", f"/services/{o.SVC_MONITOR}/env", f"/nodes/{o.NODE_WORKER}/role",
                 f"/nodes/{o.NODE_WORKER}/labels", f"/tasks/{o.TASK_MON_WORKER}"):
        body(client, "bob", path)
    body(client, "alice", f"/configs/{o.CFG_SHOP}/labels")
    assert get(client, "bob", "/services/nosuch").status_code == 404     # a missing object stays a 404


def test_cross_references_are_filtered_by_read(client: FlaskClient) -> None:
    network = body(client, "carol", f"/networks/{o.NET_SHOP}")
    assert [ref["name"] for ref in network["services"]] == ["shop_db"]     # shop_web_api is hidden
    node = body(client, "bob", f"/nodes/{o.NODE_WORKER}")
    assert [ref["id"] for ref in node["tasks"]] == [o.TASK_MON_WORKER]
    node_tasks = body(client, "bob", f"/nodes/{o.NODE_WORKER}/tasks")
    assert [item["ID"] for item in node_tasks["items"]] == [o.TASK_MON_WORKER] and node_tasks["total"] == 1
    task = body(client, "bob", f"/tasks/{o.TASK_MON_MANAGER}")
    assert task["node"]["hostname"] is None and task["service"]["name"] == "monitor"
    assert len(body(client, "bob", f"/services/{o.SVC_MONITOR}/tasks")["items"]) == 3
    stack = body(client, "alice", "/stacks/shop")["stack"]
    assert sorted(s["Spec"]["Name"] for s in stack["services"]) == ["shop_db", "shop_web_api"]
    carol_db = body(client, "carol", f"/services/{o.SVC_DB}")
    assert {ref["id"] for ref in carol_db["tasks"]} == {o.TASK_DB_1, o.TASK_DB_OLD}


def test_etags_differ_per_visible_content_and_answers_vary_on_the_caller(client: FlaskClient) -> None:
    bob, alice = get(client, "bob", "/services"), get(client, "alice", "/services")
    assert bob.headers["ETag"] != alice.headers["ETag"]
    for response in (bob, alice):
        assert {"Authorization", "Cookie"} <= set(response.vary)
    again = get(client, "bob", "/services", **{"If-None-Match": bob.headers["ETag"]})
    assert again.status_code == 304
    assert get(client, "alice", "/services", **{"If-None-Match": bob.headers["ETag"]}).status_code == 200


# ---------------------------------------------------------------------------------------------- search
def test_search_counts_and_results_only_readable(client: FlaskClient) -> None:
    found = body(client, "bob", "/search?q=shop")
    assert found["results"] == {} and found["counts"] == {} and found["total"] == 0
    alice = body(client, "alice", "/search?q=shop&limit=1")
    assert alice["counts"]["services"] == 2 and len(alice["results"]["services"]) == 1
    assert alice["counts"]["tasks"] == 4 and "nodes" not in alice["counts"]
    root = body(client, "root", "/search?q=worker")
    assert root["counts"]["nodes"] == 2
    assert "nodes" not in body(client, "alice", "/search?q=worker")["counts"]
    assert body(client, "bob", "/search?q=worker")["counts"]["nodes"] == 1
    carol = body(client, "carol", "/search?q=shop")
    assert carol["counts"] == {"services": 1, "tasks": 2, "networks": 1}


# ---------------------------------------------------------------------------------------------- history
def _history_ids(client: FlaskClient, user: str, url: str = "/history?limit=200") -> set[str]:
    return {item["resourceId"] for item in body(client, user, url)["items"]}


def test_history_json_holds_only_readable_records(client: FlaskClient) -> None:
    everything = _history_ids(client, "root")
    assert o.SVC_WEB in everything and o.NODE_MANAGER in everything
    assert _history_ids(client, "bob") == {o.SVC_MONITOR, o.NODE_WORKER, o.TASK_MON_MANAGER, o.TASK_MON_WORKER,
                                           o.TASK_MON_DOWN}
    alice = _history_ids(client, "alice")
    assert {o.SVC_WEB, o.SVC_DB, o.CFG_SHOP, o.TASK_WEB_1, "shop"} <= alice and o.SVC_MONITOR not in alice
    # pages stay full: limit counts readable records
    assert len(body(client, "bob", "/history?limit=2")["items"]) == 2


def test_a_removed_objects_history_is_judged_by_its_recorded_name_and_stack(acl_harness: Harness,
                                                                            client: FlaskClient) -> None:
    acl_harness.cache.remove(ResourceKind.CONFIG, o.CFG_SHOP)
    removed = [item for item in body(client, "alice", "/history?limit=200")["items"]
               if item["resourceId"] == o.CFG_SHOP and item["action"] == "remove"]
    assert removed, "alice reads the stack, so she sees its config's removal"
    assert o.CFG_SHOP not in _history_ids(client, "bob")
    feed = get(client, "alice", f"/configs/{o.CFG_SHOP}.atom")
    assert feed.status_code == 200 and "shop_nginx" in feed.get_data(as_text=True)
    assert get(client, "bob", f"/configs/{o.CFG_SHOP}.atom").status_code == 404   # nothing readable left


def test_history_entry_of_an_unreadable_object_is_403(client: FlaskClient, acl_harness: Harness) -> None:
    items = body(client, "root", "/history?limit=200")["items"]
    hidden = next(item for item in items if item["resourceId"] == o.SVC_WEB)
    refused = get(client, "bob", f"/history/{hidden['id']}")
    assert_denied(refused, f"history:{hidden['id']}")   # the entry as asked for, never the hidden object
    text = refused.get_data(as_text=True)
    assert o.SVC_WEB not in text and "service" not in text and hidden["name"] not in text
    body(client, "alice", f"/history/{hidden['id']}")


@pytest.mark.parametrize("url", ["/history.atom?limit=200", "/history.feed.json?limit=200", "/events.atom",
                                 "/services.atom", "/tasks.atom", "/nodes.atom", "/search.atom?q=o",
                                 f"/services/{o.SVC_MONITOR}.atom"])
def test_feeds_carry_only_readable_objects(client: FlaskClient, url: str) -> None:
    response = get(client, "bob", url)
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert not [name for name in HIDDEN_FROM_BOB if name in text], text[:2000]
    assert "monitor" in text or "worker-1" in text or url.startswith("/search")


# ---------------------------------------------------------------------------------------------- recommendations
def test_recommendations_are_filtered_per_finding(client: FlaskClient, acl_harness: Harness) -> None:
    everything = wait_until(lambda: body(client, "root", "/recommendations")["items"], 5,
                            message="the first evaluation of the checks")
    assert {item["targetName"] for item in everything} >= {"shop_web_api", "manager-1", "monitor"}
    bob = body(client, "bob", "/recommendations")
    assert {item["targetName"] for item in bob["items"]} <= {"monitor", "worker-1"}
    assert bob["total"] == len(bob["items"]) == sum(bob["summary"].values())
    assert all(item["scope"] != "cluster" for item in bob["items"])        # no swarm:cluster grant
    alice = body(client, "alice", "/recommendations")
    assert {item["targetName"] for item in alice["items"]} <= {"shop_web_api", "shop_db"} and alice["items"]
    text = get(client, "bob", "/recommendations.atom").get_data(as_text=True)
    assert not [name for name in HIDDEN_FROM_BOB if name in text]


# ---------------------------------------------------------------------------------------------- cluster-wide
CLUSTER_WIDE = ["/cluster", "/cluster/capacity", "/cluster/metrics", "/swarm", "/disk-usage", "/stacks/summary",
                "/topology", "/topology/networks", "/topology/placement", "/metrics?query=up", "/metrics/status",
                "/metrics/labels", "/history", "/history.atom", "/search?q=x", "/recommendations"]


@pytest.mark.parametrize("url", CLUSTER_WIDE)
def test_cluster_wide_reads_need_a_grant(client: FlaskClient, url: str) -> None:
    response = get(client, "nobody", url)
    assert response.status_code == 403, response.get_data(as_text=True)[:300]
    assert response.get_json()["code"] == "ACL001"


def test_cluster_wide_reads_answer_with_a_grant(client: FlaskClient) -> None:
    for url in ("/cluster", "/cluster/capacity", "/stacks/summary", "/topology"):
        body(client, "bob", url)
    assert [row["name"] for row in body(client, "bob", "/stacks/summary")["items"]] == []
    assert [row["name"] for row in body(client, "alice", "/stacks/summary")["items"]] == ["shop"]
    assert body(client, "nobody", "/services")["total"] == 0     # a list is filtered, not refused


def _graph(client: FlaskClient, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    graphs = body(client, user, "/topology")["graphs"]
    return graphs[0], graphs[1]


def test_topology_shows_only_readable_services_nodes_and_tasks(client: FlaskClient) -> None:
    logical, physical = _graph(client, "bob")
    assert sorted(node["label"] for node in logical["nodes"].values()) == ["monitor"]
    assert sorted(node["label"] for node in physical["nodes"].values()) == ["monitor", "worker-1"]
    assert not logical.get("edges") and not logical.get("hyperedges")
    placement = physical["hyperedges"]
    assert len(placement) == 1 and placement[0]["nodes"] == [f"urn:service:service:{o.SVC_MONITOR}",
                                                              f"urn:service:node:{o.NODE_WORKER}"]
    logical, physical = _graph(client, "alice")
    assert sorted(node["label"] for node in logical["nodes"].values()) == ["shop_db", "shop_web_api"]
    assert len(logical["edges"]) == 1 and logical["hyperedges"][0]["metadata"]["name"] == "shop"
    assert all(node["metadata"]["kind"] == "service" for node in physical["nodes"].values())
    logical, _ = _graph(client, "carol")   # shop_db alone: no edge to the hidden shop_web_api, no stack
    assert [node["label"] for node in logical["nodes"].values()] == ["shop_db"]
    assert not logical.get("edges") and not logical.get("hyperedges")
    for url in ("/topology", "/topology/networks", "/topology/placement", "/topology.dot", "/topology.graphml"):
        response = get(client, "bob", url)
        assert response.status_code == 200
        text = response.get_data(as_text=True)
        assert not [name for name in HIDDEN_FROM_BOB if name in text], (url, text[:1000])


# ---------------------------------------------------------------------------------------------- plugins
class _Plugins:
    PLUGINS: list[dict[str, Any]] = [{"Id": "p1", "Name": "sshfs:latest", "Enabled": True},
                                     {"Id": "p2", "Name": "secretfs:latest"}]

    def all(self) -> list[dict[str, Any]]:
        return [dict(plugin) for plugin in self.PLUGINS]

    def inspect(self, name: str) -> dict[str, Any]:
        return next(dict(p) for p in self.PLUGINS if name in (p["Id"], p["Name"], str(p["Name"]).split(":")[0]))


def test_plugins_are_filtered_per_item_without_needing_a_grant(client: FlaskClient,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import app.blueprints.plugins as plugins

    monkeypatch.setattr(plugins, "plugin_engine", lambda: _Plugins())
    assert body(client, "nobody", "/plugins")["total"] == 0
    assert body(client, "root", "/plugins")["total"] == 2
    assert_denied(get(client, "bob", "/plugins/p2"), "plugin:p2")
    assert body(client, "root", "/plugins/p2")["plugin"]["Name"] == "secretfs:latest"


# ---------------------------------------------------------------------------------------------- nothing leaks
BOB_URLS = ["/services", "/tasks", "/nodes", "/configs", "/secrets", "/networks", "/volumes", "/stacks",
            f"/services/{o.SVC_MONITOR}", f"/services/{o.SVC_MONITOR}/tasks", f"/nodes/{o.NODE_WORKER}",
            f"/nodes/{o.NODE_WORKER}/tasks", f"/tasks/{o.TASK_MON_MANAGER}", f"/tasks/{o.TASK_MON_DOWN}",
            "/search?q=a", "/search?q=e&limit=0", "/history?limit=200", "/recommendations", "/stacks/summary",
            "/topology", "/services.atom?limit=200", "/history.feed.json?limit=200",
            f"/services/{o.SVC_WEB}", f"/configs/{o.CFG_OTHER}", f"/secrets/{o.SEC_OTHER}", "/stacks/shop",
            "/cluster", "/cluster/capacity", "/recommendations.atom", "/history.atom?limit=200"]


def test_no_hidden_name_appears_in_any_body(client: FlaskClient) -> None:
    hidden_entries = [item["id"] for item in body(client, "root", "/history?limit=200")["items"]
                      if item["resourceId"] in (o.SVC_WEB, o.CFG_OTHER, o.NODE_MANAGER)]
    assert hidden_entries
    for url in BOB_URLS + [f"/history/{seq}" for seq in hidden_entries[:5]]:
        text = get(client, "bob", url).get_data(as_text=True)
        leaked = [name for name in HIDDEN_FROM_BOB if name in text and name not in url]
        assert not leaked, (url, leaked)


# ---------------------------------------------------------------------------------------------- hidden names
def test_capacity_covers_only_the_nodes_the_caller_may_read(client: FlaskClient) -> None:
    """Rows, totals, maxima and nodeCount over readable nodes (the /nodes rule): bob reads worker-1 only."""
    everything = body(client, "root", "/cluster/capacity")
    assert len(everything["nodes"]) == everything["nodeCount"] == 3
    bob = body(client, "bob", "/cluster/capacity")
    assert [(row["id"], row["hostname"]) for row in bob["nodes"]] == [(o.NODE_WORKER, "worker-1")]
    row = bob["nodes"][0]
    assert bob["nodeCount"] == 1 and bob["totalMemory"] == bob["maxNodeMemory"] == row["memory"]["total"]
    assert bob["available"]["memory"] == row["memory"]["available"]
    assert bob["totalMemory"] < everything["totalMemory"]
    text = get(client, "bob", "/cluster/capacity").get_data(as_text=True)
    assert o.NODE_MANAGER not in text and o.NODE_DOWN not in text and "manager-1" not in text
    alice = body(client, "alice", "/cluster/capacity")   # a grant, but no node: an empty document
    assert alice["nodes"] == [] and alice["nodeCount"] == 0 and alice["totalCPU"] == 0


def test_cluster_overview_names_the_local_node_only_to_its_readers(client: FlaskClient,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import app.blueprints.cluster as cluster_views

    class _System:
        def local_node_id(self) -> str:
            return o.NODE_MANAGER

    monkeypatch.setattr(cluster_views, "system_info", lambda: _System())
    assert body(client, "root", "/cluster")["localNodeID"] == o.NODE_MANAGER
    assert "localNodeID" not in body(client, "bob", "/cluster")


def test_a_finding_naming_an_object_is_judged_by_that_object(client: FlaskClient) -> None:
    """An unused config/secret/network/volume finding: swarm:cluster alone must not reveal its name."""
    everything = wait_until(lambda: body(client, "root", "/recommendations")["items"], 5,
                            message="the first evaluation of the checks")
    unused = [item for item in everything if item["resourceType"] in ("config", "secret", "network", "volume")]
    assert unused, [item["category"] for item in everything]
    dave = body(client, "dave", "/recommendations")["items"]
    assert dave and all(item["resourceType"] == "cluster" for item in dave)
    alice = body(client, "alice", "/recommendations")["items"]
    shop_unused = [item for item in unused if item["targetName"].startswith("shop")]
    assert all(item in alice for item in shop_unused)


def test_a_finding_that_names_hidden_services_is_hidden(acl_harness: Harness) -> None:
    from app.acl.evaluator import access_for
    from app.acl.policy import parse_policy
    from app.auth.identity import Identity
    from app.http.acl_read import finding_readable
    from app.recommendations.findings import Finding

    cache = acl_harness.cache
    bob = access_for(Identity("bob", "bob", "headers", groups=("ops",)), parse_policy(POLICY), auth_enabled=True)
    pinned = Finding("node-unavailable-pinned", "critical", "node", o.NODE_WORKER, "worker-1",
                     "Node is down while services pinned to it by constraints: shop_web_api.", "fix",
                     mentions=(o.SVC_WEB,))
    assert not finding_readable(bob, cache, pinned)
    pinned.mentions = (o.SVC_MONITOR,)
    assert finding_readable(bob, cache, pinned)
