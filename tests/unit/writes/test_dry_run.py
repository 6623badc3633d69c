"""``?dryRun=true`` on REST writes (recording engine writer): every check runs, nothing is written, the answer
says what would change; writes without a dry run refuse it with 400 API022."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import g

from app.http import writes
from app.writes.dry_run import SUPPORTED
from app.writes.operations import MERGE_PATCH, OPERATIONS
from tests.unit.mcp.tools_support import running
from tests.unit.objects import CFG_OTHER, CFG_SHOP, NODE_DOWN, NODE_WORKER, SEC_OTHER, SVC_WEB, TASK_WEB_1, VOL_OTHER

PLACEHOLDER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


def _url(rule: str) -> str:
    return PLACEHOLDER.sub("x", rule)


@pytest.mark.parametrize("name", sorted(set(OPERATIONS) - SUPPORTED))
def test_writes_without_a_dry_run_refuse_it(name: str) -> None:
    op = OPERATIONS[name]
    with running(operations_level=3) as (harness, writer):
        response = harness.app.test_client().open(_url(op.rule) + "?dryRun=true", method=op.method, json={})
        assert response.status_code == 400, response.get_data(as_text=True)
        assert response.get_json()["code"] == "API022"
        assert writer.calls == []


def test_the_supported_set_covers_updates_removals_creates_swarm_settings_and_plugin_toggles() -> None:
    assert {"scale_service", "patch_service_env", "put_node_labels", "remove_stack", "create_secret",
            "update_swarm_raft", "enable_plugin", "remove_plugin", "update_plugin_settings"} <= SUPPORTED
    assert set(OPERATIONS) - SUPPORTED == {"rotate_swarm_token", "rotate_swarm_unlock_key", "force_rotate_swarm_ca",
                                           "unlock_swarm", "read_swarm_unlock_key", "install_plugin",
                                           "upgrade_plugin", "plugin_privileges"}


def test_dry_run_is_checked_like_the_write() -> None:
    with running(operations_level=3) as (harness, writer):
        client = harness.app.test_client()
        bad = client.put(f"/services/{SVC_WEB}/scale?dryRun=maybe", json={"replicas": 1})
        assert bad.status_code == 400 and bad.get_json()["code"] == "API012"
        assert client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": -1}).get_json()["code"] \
            == "SVC004"
        assert client.put("/services/nope/scale?dryRun=true", json={"replicas": 1}).status_code == 404
        stale = client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 1},
                           headers={"If-Match": '"not-the-tag"'})
        assert stale.status_code == 412
        reserved = client.patch(f"/services/{SVC_WEB}/labels?dryRun=true", data=b'{"com.docker.stack.namespace":null}',
                                headers={"Content-Type": MERGE_PATCH})
        assert reserved.get_json()["code"] == "API017"
        assert client.delete(f"/configs/{CFG_SHOP}?dryRun=true").get_json()["code"] == "CFG001"
        assert client.delete(f"/nodes/{NODE_WORKER}?dryRun=true").get_json()["code"] == "NOD001"
        assert writer.writes == []
    with running(operations_level=0) as (harness, writer):
        refused = harness.app.test_client().put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 1})
        assert refused.status_code == 403 and refused.get_json()["code"] == "OPS001"


def _dry(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Cache-Control"] == "no-store"
    body: dict[str, Any] = response.get_json()
    assert body["@type"] == "WriteDryRun" and body["dryRun"] is True
    return body


def test_updates_answer_the_field_diff() -> None:
    with running(operations_level=3) as (harness, writer):
        client = harness.app.test_client()
        scale = _dry(client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 5}))
        assert scale["action"] == "update" and scale["summary"] == "replicas 2→5"
        assert scale["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 2, "new": 5}]
        env = _dry(client.patch(f"/services/{SVC_WEB}/env?dryRun=true", data=b'{"A":"1"}',
                                headers={"Content-Type": MERGE_PATCH}))
        assert env["changes"] == [{"field": 'Spec.TaskTemplate.ContainerSpec.Env["A"]', "new": "1"}]
        same = _dry(client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 2}))
        assert same["changes"] == [] and same["summary"] == "no change"
        node = _dry(client.put(f"/nodes/{NODE_WORKER}/availability?dryRun=true", json={"availability": "drain"}))
        assert node["target"] == {"type": "node", "id": NODE_WORKER, "name": "worker-1",
                                  "@id": f"/nodes/{NODE_WORKER}"}
        assert {"field": "Spec.Availability", "old": "active", "new": "drain"} in node["changes"]
        labels = _dry(client.put(f"/secrets/{SEC_OTHER}/labels?dryRun=true", json={"x": "y"}))
        assert labels["changes"] and not any("Data" in change["field"] for change in labels["changes"])
        assert writer.writes == []


def test_rollback_diff_is_the_previous_spec() -> None:
    with running(operations_level=3) as (harness, writer):
        entry = harness.cache.get(*_service(harness))
        assert entry is not None
        previous = {**entry.raw["Spec"], "Mode": {"Replicated": {"Replicas": 9}}}
        entry.raw["PreviousSpec"] = previous
        body = _dry(harness.app.test_client().post(f"/services/{SVC_WEB}/rollback?dryRun=true"))
        assert body["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 2, "new": 9}]
        assert writer.writes == []


def _service(harness: Any) -> tuple[Any, str]:
    from app.resources import ResourceKind
    return ResourceKind.SERVICE, SVC_WEB


def test_removals_and_creates_say_what() -> None:
    with running(operations_level=3) as (harness, writer):
        client = harness.app.test_client()
        volume = _dry(client.delete(f"/volumes/{VOL_OTHER}?dryRun=true"))
        assert volume["action"] == "remove" and [r["id"] for r in volume["removes"]] == [VOL_OTHER]
        node = _dry(client.delete(f"/nodes/{NODE_DOWN}?dryRun=true"))
        assert node["removes"][0]["name"] == "worker-2"
        task = _dry(client.delete(f"/tasks/{TASK_WEB_1}?dryRun=true"))
        assert task["removes"][0]["id"] == TASK_WEB_1
        stack = _dry(client.delete("/stacks/shop?dryRun=true"))
        assert {r["type"] for r in stack["removes"]} >= {"service", "network", "secret", "config"}
        assert stack["note"] == "volumes are kept"
        used = client.delete(f"/configs/{CFG_OTHER}?dryRun=true", headers={"If-Match": "*"})
        assert used.get_json()["code"] == "CFG001"   # the cache's pre-check runs in a dry run too
        secret = _dry(client.post("/secrets?dryRun=true", json={"name": "new_secret", "data": "aGVsbG8="}))
        assert secret["action"] == "create" and secret["creates"]["spec"]["Name"] == "new_secret"
        assert "Data" not in secret["creates"]["spec"]
        config = _dry(client.post("/configs?dryRun=true", json={"name": "new_config", "data": "aGVsbG8="}))
        assert config["creates"]["spec"]["Data"] == "aGVsbG8="
        taken = client.post("/configs?dryRun=true", json={"name": "shop_nginx", "data": "aGVsbG8="})
        assert taken.get_json()["code"] == "CFG003"
        assert writer.writes == []


def test_idempotency_key_is_not_recorded_for_a_dry_run() -> None:
    with running(operations_level=3) as (harness, writer):
        client = harness.app.test_client()
        key = {"Idempotency-Key": '"k-1"'}
        first = client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 3}, headers=key)
        second = client.put(f"/services/{SVC_WEB}/scale?dryRun=true", json={"replicas": 4}, headers=key)
        assert first.status_code == second.status_code == 200   # no API020: the key was never claimed
        assert "Idempotent-Replayed" not in second.headers
        real = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 4}, headers=key)
        assert real.status_code == 200 and len(writer.writes) == 1


def test_the_engine_is_never_called_in_a_dry_run() -> None:
    with running(operations_level=3) as (harness, _), harness.app.test_request_context("/x"):
        g.dry_run = True
        with pytest.raises(RuntimeError, match="dry run"):
            writes.engine_write(OPERATIONS["scale_service"], None, None, lambda: None)


def test_plugin_writes_dry_run_over_a_scripted_engine() -> None:
    from app.blueprints import plugins as plugin_views
    from app.engine.plugins import PluginEngine
    from tests.unit.swarm.fakes import FakeCalls

    found = {"Id": "abc", "Name": "sshfs:latest", "Enabled": True,
             "Settings": {"Env": ["DEBUG=0"], "Args": []}, "Config": {"Args": {"Name": "opts"}}}
    with running(operations_level=3) as (harness, _):
        calls = FakeCalls({("GET", "/plugins/sshfs/json"): found})
        harness.app.extensions[plugin_views.ENGINE_KEY] = PluginEngine(calls)
        client = harness.app.test_client()
        disable = _dry(client.post("/plugins/sshfs/disable?dryRun=true"))
        assert disable["changes"] == [{"field": "Enabled", "old": True, "new": False}]
        assert disable["target"]["name"] == "sshfs:latest"
        assert client.post("/plugins/sshfs/enable?dryRun=true").get_json()["code"] == "ENG003"   # already
        assert client.delete("/plugins/sshfs?dryRun=true").get_json()["code"] == "ENG003"        # enabled
        removal = _dry(client.delete("/plugins/sshfs?dryRun=true&force=true"))
        assert removal["action"] == "remove" and removal["removes"][0]["id"] == "abc"
        settings = _dry(client.patch("/plugins/sshfs/settings?dryRun=true",
                                     json={"env": ["DEBUG=1"], "args": ["-o", "ro"]}))
        assert settings["changes"] == [{"field": "Settings.Env", "old": ["DEBUG=0"], "new": ["DEBUG=1"]},
                                       {"field": "Settings.Args", "old": [], "new": ["-o", "ro"]}]
        assert client.post("/plugins/nope/enable?dryRun=true").status_code == 404
        assert {method for method, _ in calls.paths()} == {"GET"}   # nothing but reads reached the engine
