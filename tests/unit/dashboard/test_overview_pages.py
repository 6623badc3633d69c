"""The overview (/) and the cluster, recommendations, swarm, plugins and profile pages on the fake engine:
figures from the real JSON answers, panels the caller may not read showing their problem (ACL), the live
blocks as fragments after an engine change, join tokens never on the swarm page, plugins over a scripted
engine transport."""

from __future__ import annotations

import html as htmllib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.blueprints import plugins as plugin_views
from app.blueprints import swarm as swarm_views
from app.engine.plugins import PluginEngine
from app.engine.swarm import SwarmEngine
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness, wait_until
from tests.unit.swarm.fakes import FakeCalls, swarm_object

HTML = {"Accept": "text/html"}
BLOCKS = ("health", "counts", "capacity", "findings", "changes")


def page(client: FlaskClient, url: str, **headers: str) -> tuple[int, str]:
    response = client.get(url, headers={**HTML, **headers})
    assert response.mimetype == "text/html"
    return response.status_code, response.get_data(as_text=True)


def main(body: str) -> str:
    """The page's <main> (the header holds the navigation, the same on every page)."""
    found = re.search(r"<main\b.*?</main>", body, re.S)
    assert found, body[:500]
    return found.group(0)


def count(body: str, name: str) -> int:
    found = re.search(rf'data-count="{name}">([^<]*)<', body)
    assert found, f"no data-count={name}"
    return int(found.group(1))


def problems(body: str) -> list[str]:
    return re.findall(r'<div class="problem" role="alert">.*?<code>(\w+)</code>', body, re.S)


def json_of(client: FlaskClient, url: str, **headers: str) -> Any:
    response = client.get(url, headers={"Accept": "application/json", **headers})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def wait_for_findings(client: FlaskClient, **headers: str) -> None:
    wait_until(lambda: json_of(client, "/recommendations", **headers)["computedAt"], 5,
               message="the first recommendations run")


# --------------------------------------------------------------------------- overview
def test_overview_renders_the_fake_clusters_counts(client: FlaskClient) -> None:
    wait_for_findings(client)
    status, body = page(client, "/")
    assert status == 200
    cluster_json = json_of(client, "/cluster")
    assert (count(body, "nodes"), count(body, "services"), count(body, "tasks"), count(body, "stacks")) == (3, 3, 7, 1)
    assert cluster_json["taskCount"] == 7 and cluster_json["tasksByState"]["running"] == 4
    assert count(body, "tasks-running") == 4 and count(body, "tasks-failed") == 1
    assert 'data-stream="/events"' in body   # live over the global stream
    for block in BLOCKS:
        assert f'data-block="{block}"' in body
    # health: the leader from the managers, the down/draining node under "needs attention"
    assert re.search(rf'<dt>Leader</dt>\s*<dd><a href="/nodes/{o.NODE_MANAGER}">manager-1</a>', body)
    assert count(body, "managers-reachable") == 1
    attention = body.split("Needs attention", 1)[1].split("</ul>", 1)[0]
    assert f'href="/nodes/{o.NODE_DOWN}">worker-2</a>' in attention and "manager-1" not in attention
    # capacity: one meter per node and resource, plus the totals
    assert len(re.findall(r"<meter\b", body)) == 2 * 3 + 2
    assert 'aria-label="CPU reserved on worker-1"' in body
    # findings: the summary of the real answer, its top 5 linked
    summary = json_of(client, "/recommendations")["summary"]
    for severity in ("critical", "warning", "info"):
        assert count(body, f"findings-{severity}") == summary[severity]
    assert len(re.findall(r"<li><span class=\"state state-(?:critical|warning|info)\">",
                          body.split('<ol class="findings">', 1)[1].split("</ol>", 1)[0])) == 5
    # recent changes: the latest 10 records, each linked to its entry
    latest = json_of(client, "/history?limit=10")["items"]
    assert len(latest) == 10
    for record in latest:
        assert f'href="{record["@id"]}"' in body
    assert not problems(main(body))


def test_overview_panels_refresh_as_fragments_after_an_engine_change(harness: Harness, client: FlaskClient) -> None:
    response = client.get("/", headers={**HTML, "Shoal-Fragment": "counts,health"})
    fragments = response.get_data(as_text=True)
    assert response.status_code == 200 and fragments.startswith('<template data-block="counts">')
    assert "<main" not in fragments and count(fragments, "tasks") == 7
    new_id = o.engine_id("taskwebthree")
    harness.engine.objects[ResourceKind.TASK][new_id] = o.task(new_id, o.SVC_WEB, o.NODE_WORKER, slot=3)
    harness.engine.emit("container", "start", "d" * 64, **{"com.docker.swarm.task.id": new_id})
    wait_until(lambda: harness.cache.get(ResourceKind.TASK, new_id) is not None, 3, message="the new task")
    after = client.get("/", headers={**HTML, "Shoal-Fragment": "counts"}).get_data(as_text=True)
    assert count(after, "tasks") == 8 and count(after, "tasks-running") == 5


def test_overview_before_the_first_sync_shows_why_in_each_panel(unsynced: Harness) -> None:
    status, body = page(unsynced.app.test_client(), "/")
    assert status == 200
    found = problems(main(body))
    assert found == ["ENG001"] * len(BLOCKS)
    assert "data-count" not in body   # no zero counts taken for an empty cluster


# --------------------------------------------------------------------------- ACL: panels the caller may not read
POLICY = {"grants": [
    {"resources": ["service:monitor", "node:worker-1"], "audience": ["user:bob"], "permissions": ["read"]},
]}


@pytest.fixture
def acl_client() -> Iterator[FlaskClient]:
    built = build_harness(FakeEngine(cluster()), auth_mode="headers", headers_subject="X-User",
                          headers_groups="X-Groups", trusted_proxies=("127.0.0.1/32",),
                          acl_policy=json.dumps(POLICY))
    built.start()
    try:
        yield built.app.test_client()
    finally:
        built.stop()


def test_a_caller_without_grants_sees_each_panels_problem_not_a_broken_page(acl_client: FlaskClient) -> None:
    status, body = page(acl_client, "/", **{"X-User": "nobody"})
    assert status == 200
    found = problems(main(body))
    assert found.count("ACL001") >= 4, found   # cluster, capacity, findings, history: each says why
    for name in ("manager-1", "worker-1", "shop_web_api", "monitor"):
        assert name not in main(body)
    assert "data-count=\"tasks\"" not in body


def test_the_overview_names_only_what_the_caller_may_read(acl_client: FlaskClient) -> None:
    wait_for_findings(acl_client, **{"X-User": "bob"})
    status, body = page(acl_client, "/", **{"X-User": "bob"})
    content = main(body)
    assert status == 200 and not problems(content)
    assert "worker-1" in content   # the node bob may read: its capacity row
    for hidden in ("manager-1", "worker-2", "shop_web_api", "shop_db"):
        assert hidden not in content, hidden
    assert "none visible" in content   # the leader is a node bob may not read
    assert count(body, "tasks") == 7   # /cluster stays cluster-wide counts (no names)


def test_profile_shows_the_identity_and_its_grants(acl_client: FlaskClient) -> None:
    status, body = page(acl_client, "/profile", **{"X-User": "bob", "X-Groups": "ops,dev"})
    content = htmllib.unescape(main(body))
    assert status == 200
    assert '<code data-field="subject">bob</code>' in content
    assert "<code>ops</code>" in content and "<code>dev</code>" in content
    assert '<dd data-field="provider">headers' in content
    assert "<code>service:monitor</code>" in content and "<code>node:worker-1</code>" in content
    assert "Log out" not in content   # only an OIDC session has a logout
    status, body = page(acl_client, "/auth/whoami", **{"X-User": "bob"})
    assert status == 200 and "<title>Who am I · Shoal</title>" in body and "service:monitor" in body


def test_profile_without_a_policy_says_everything_is_allowed(client: FlaskClient) -> None:
    status, body = page(client, "/profile")
    assert status == 200
    assert '<code data-field="subject">anonymous</code>' in body
    assert '<dd data-field="operations-level">1 · operational</dd>' in body
    assert '<p data-field="permissions">No access policy is active' in body


# --------------------------------------------------------------------------- cluster pages
def test_cluster_and_capacity_pages_show_the_json_figures(client: FlaskClient) -> None:
    status, body = page(client, "/cluster")
    assert status == 200 and count(body, "tasks") == 7 and count(body, "nodes") == 3
    assert 'data-stream="/events"' in body and 'data-block="cluster"' in body
    status, body = page(client, "/cluster/capacity")
    capacity = json_of(client, "/cluster/capacity")
    assert status == 200
    for node in capacity["nodes"]:
        assert f'href="/nodes/{node["id"]}">{node["hostname"]}</a>' in body
    assert len(re.findall(r"<meter\b", body)) == 2 * len(capacity["nodes"]) + 2


def test_disk_usage_page_shows_the_engines_problem(client: FlaskClient) -> None:
    status, body = page(client, "/disk-usage")   # the fake engine has no socket: the API's own 503
    assert status == 503 and problems(main(body)) == ["ENG001"]


# --------------------------------------------------------------------------- recommendations
def test_recommendations_are_grouped_by_severity_and_linked(client: FlaskClient) -> None:
    wait_for_findings(client)
    answer = json_of(client, "/recommendations")
    status, body = page(client, "/recommendations")
    assert status == 200 and 'data-stream="/recommendations"' in body and 'data-block="findings"' in body
    present = [s for s in ("critical", "warning", "info") if answer["summary"][s]]
    headings = re.findall(r'<h2 id="sev-(\w+)">', body)
    assert headings == present   # most severe first, empty groups left out
    for finding in answer["items"]:
        row = re.search(rf'<tr data-finding="{re.escape(finding["id"])}">.*?</tr>', body, re.S)
        assert row, finding["id"]
        section = body[:row.start()].rsplit('<h2 id="sev-', 1)[1]
        assert section.startswith(finding["severity"])
        if finding["link"]:
            assert f'href="{finding["link"]}">{finding["resourceName"]}</a>' in row.group(0)
        assert htmllib.escape(finding["fix"], quote=False) in row.group(0)


def test_recommendations_filter_is_the_apis(client: FlaskClient) -> None:
    wait_for_findings(client)
    status, body = page(client, "/recommendations?severity=info")
    assert status == 200 and re.findall(r'<h2 id="sev-(\w+)">', body) == ["info"]
    assert '<option selected>info</option>' in body
    status, body = page(client, "/recommendations?severity=urgent")
    assert status == 400 and problems(main(body)) == ["API012"]


# --------------------------------------------------------------------------- swarm and plugins (scripted engine)
PLUGIN = {"Id": "5f0e", "Name": "sshfs:latest", "Enabled": False, "PluginReference": "docker.io/vieux/sshfs:latest",
          "Settings": {"Env": ["DEBUG=0"], "Args": [], "Mounts": [], "Devices": []},
          "Config": {"Description": "sshFS plugin for Docker", "Interface": {"Types": ["docker.volumedriver/1.0"],
                                                                         "Socket": "sshfs.sock"},
                     "Args": {"Name": "opts"}, "Network": {"Type": "host"},
                     "Linux": {"Capabilities": ["CAP_SYS_ADMIN"]}}}


@pytest.fixture(scope="module")
def levels() -> Iterator[dict[int, Harness]]:
    built = {level: build_harness(FakeEngine(cluster()), operations_level=level) for level in (1, 3)}
    for harness in built.values():
        harness.start()
        calls = FakeCalls({("GET", "/swarm"): swarm_object(), ("GET", "/plugins"): [PLUGIN],
                           ("GET", "/plugins/sshfs:latest/json"): PLUGIN})
        harness.app.extensions[swarm_views.ENGINE_KEY] = SwarmEngine(calls)
        harness.app.extensions[plugin_views.ENGINE_KEY] = PluginEngine(calls)
        harness.app.extensions["test.calls"] = calls
    yield built
    for harness in built.values():
        harness.stop()


def test_swarm_page_shows_the_settings_never_the_join_tokens(levels: dict[int, Harness]) -> None:
    client = levels[3].app.test_client()
    assert json_of(client, "/swarm")["swarm"]["JoinTokens"]["Worker"] == "SWMTKN-1-w"   # the JSON has them
    status, body = page(client, "/swarm")
    assert status == 200
    assert "SWMTKN" not in body
    assert "<dt>Node heartbeat</dt><dd>5 s" in body and "<dt>Node certificate expiry</dt><dd>90 d" in body
    assert "<dt>Snapshot interval</dt><dd>10000 log entries" in body
    assert "<code>10.0.0.1:2377</code>" in body   # where to join
    calls: FakeCalls = levels[3].app.extensions["test.calls"]
    assert calls.paths() and not [p for p in calls.paths() if "unlock" in p[1]]   # the key is not fetched


def test_unlock_key_page_renders_the_apis_refusal(levels: dict[int, Harness]) -> None:
    status, body = page(levels[1].app.test_client(), "/swarm/unlock-key")
    assert status == 403 and problems(main(body)) == ["OPS001"]


def test_plugin_list_and_detail(levels: dict[int, Harness]) -> None:
    client = levels[1].app.test_client()
    status, body = page(client, "/plugins")
    assert status == 200
    assert '<a href="/plugins/sshfs:latest">sshfs:latest</a>' in body
    assert '<span class="state state-disabled">disabled</span>' in body and "docker.volumedriver/1.0" in body
    status, alias = page(client, "/swarm/plugins")
    assert status == 200 and '<a href="/plugins/sshfs:latest">sshfs:latest</a>' in alias
    status, body = page(client, "/plugins/sshfs:latest")
    assert status == 200 and "<title>sshfs:latest · Shoal</title>" in body
    assert "<code>DEBUG=0</code>" in body and "<code>CAP_SYS_ADMIN</code>" in body
    status, body = page(client, "/plugins/nope")
    assert status == 404 and problems(main(body)) == ["PLG004"]
