"""Tool calls run the REST writes (in process, recording engine writer): parameter mapping, answers, refusals
from the REST path, dry runs, the agents' level, the audit stamp, and the outer request left untouched."""

from __future__ import annotations

from flask import g

from app.resources import ResourceKind
from tests.unit.mcp.tools_support import ACL_SETTINGS, agent, call, running, text
from tests.unit.objects import CFG_OTHER, NODE_WORKER, SVC_MONITOR, SVC_WEB, VOL_OTHER


def test_scale_by_name_answers_the_engine_object() -> None:
    with running(operations_level=1) as (harness, writer), agent(harness):
        result = call("scale_service", {"id": "shop_web_api", "replicas": 4})
        assert result["isError"] is False, text(result)
        kind, object_id, version, spec, rollback = writer.writes[0][1]
        assert (kind, object_id, rollback) == ("service", SVC_WEB, False)
        assert spec["Mode"]["Replicated"]["Replicas"] == 4
        service = result["structuredContent"]
        assert service["ID"] == SVC_WEB and service["Spec"]["Mode"]["Replicated"]["Replicas"] == 4
        assert service["Version"]["Index"] == version + 1
        assert not any(key.startswith("@") for key in service)
        assert '"Replicas": 4' in text(result)
        assert g.get("write_operation") is None and g.get("dry_run") is None and g.get("mcp_tool") is None


def test_env_and_labels_are_merge_patches() -> None:
    with running(operations_level=2) as (harness, writer), agent(harness):
        result = call("update_service_env", {"id": SVC_WEB, "env": {"A": "1", "GONE": None}})
        assert result["isError"] is False, text(result)
        assert writer.writes[0][1][3]["TaskTemplate"]["ContainerSpec"]["Env"] == ["A=1"]
        result = call("update_service_labels", {"id": SVC_WEB, "labels": {"tier": "front", "traefik.enable": None}})
        assert result["isError"] is False, text(result)
        labels = writer.writes[1][1][3]["Labels"]
        assert labels["tier"] == "front" and "traefik.enable" not in labels
        assert labels["com.docker.stack.namespace"] == "shop"   # omitted keys kept
        result = call("update_node_labels", {"id": "worker-1", "labels": {"zone": "a"}})
        assert result["isError"] is False, text(result)
        assert writer.writes[2][1][:2] == ("node", NODE_WORKER)
        assert writer.writes[2][1][3]["Labels"]["zone"] == "a"
        assert result["structuredContent"]["ID"] == NODE_WORKER


def test_whole_value_tools_replace_the_sub_object() -> None:
    with running(operations_level=2) as (harness, writer), agent(harness):
        resources = {"Limits": {"MemoryBytes": 268435456}}
        assert call("update_service_resources", {"id": SVC_WEB, "resources": resources})["isError"] is False
        assert writer.writes[-1][1][3]["TaskTemplate"]["Resources"]["Limits"] == {"MemoryBytes": 268435456}
        ports = [{"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 8080, "PublishMode": "ingress"}]
        result = call("update_service_ports", {"id": SVC_WEB, "ports": ports})
        assert result["isError"] is False, text(result)
        assert writer.writes[-1][1][3]["EndpointSpec"]["Ports"][0]["PublishedPort"] == 8080
        result = call("update_service_log_driver", {"id": SVC_WEB, "driver": {"Name": "json-file",
                                                                              "Options": {"max-size": "1m"}}})
        assert result["isError"] is False, text(result)
        assert writer.writes[-1][1][3]["TaskTemplate"]["LogDriver"]["Name"] == "json-file"


def test_removal_answers_removed_true() -> None:
    with running(operations_level=3) as (harness, writer), agent(harness):
        result = call("remove_volume", {"name": VOL_OTHER, "force": True})
        assert result["isError"] is False, text(result)
        assert result["structuredContent"] == {"removed": True}
        assert writer.writes == [("remove", ("volume", VOL_OTHER, True))]
        result = call("remove_config", {"id": "app_settings"})   # used by monitor: the REST pre-check
        assert result["isError"] is True and "(CFG001)" in text(result)
        assert result["structuredContent"]["code"] == "CFG001"
        assert len(writer.writes) == 1


def test_rest_refusals_are_tool_errors() -> None:
    with running(operations_level=3) as (harness, writer), agent(harness):
        missing = call("restart_service", {"id": "nope"})
        assert missing["isError"] is True
        assert text(missing) == "Service not found: No service 'nope'. (SVC003)"
        stacked = call("remove_service", {"id": "shop_db"})
        assert stacked["isError"] is True and "(SVC002)" in text(stacked)
        global_ = call("scale_service", {"id": SVC_MONITOR, "replicas": 2})
        assert "(SVC005)" in text(global_)
        assert writer.writes == []


def test_acl_write_is_checked_by_the_rest_path() -> None:
    with running(operations_level=3, **ACL_SETTINGS) as (harness, writer):
        with agent(harness, "reader"):
            denied = call("scale_service", {"id": "shop_web_api", "replicas": 3}, user="reader")
            assert denied["isError"] is True
            assert text(denied) == "Write access denied: write access denied for service:shop_web_api (ACL002)"
            assert denied["structuredContent"]["resource"] == "service:shop_web_api"
        with agent(harness, "ops"):
            node = call("update_node_availability", {"id": "worker-1", "availability": "drain"}, user="ops")
            # as REST: a caller who may not read the node is told the key it sent (the id), not the hostname
            assert text(node).endswith(f"write access denied for node:{NODE_WORKER} (ACL002)")
            allowed = call("scale_service", {"id": "shop_web_api", "replicas": 3}, user="ops")
            assert allowed["isError"] is False, text(allowed)
        assert len(writer.writes) == 1


def test_tools_are_gated_by_the_agents_level_not_the_servers() -> None:
    with running(operations_level=0, mcp_operations_level=3) as (harness, writer), agent(harness):
        result = call("update_node_availability", {"id": "worker-1", "availability": "pause"})
        assert result["isError"] is False, text(result)
        assert writer.writes[0][1][3]["Availability"] == "pause"
    with running(operations_level=3, mcp_operations_level=1) as (harness, writer), agent(harness):
        assert call("update_node_role", {"id": "worker-1", "role": "manager"})["isError"] is True
        assert writer.writes == []


def test_dry_run_tool_changes_nothing_and_answers_the_diff() -> None:
    with running(operations_level=3) as (harness, writer), agent(harness):
        result = call("scale_service", {"id": "shop_web_api", "replicas": 7, "dryRun": True})
        assert result["isError"] is False, text(result)
        body = result["structuredContent"]
        assert body["dryRun"] is True and body["operation"] == "scale_service" and body["action"] == "update"
        assert body["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 2, "new": 7}]
        assert body["target"]["id"] == SVC_WEB
        removal = call("remove_config", {"id": "shop_nginx", "dryRun": True})
        assert "(CFG001)" in text(removal)   # the checks of the write run in a dry run too
        volume = call("remove_volume", {"name": VOL_OTHER, "dryRun": True})
        assert volume["structuredContent"]["removes"][0]["id"] == VOL_OTHER
        assert writer.writes == []
        assert harness.runtime.audit.pending(ResourceKind.SERVICE, SVC_WEB) is None


def test_audit_stamp_names_the_agent_tool_and_client() -> None:
    with running(operations_level=3, **ACL_SETTINGS) as (harness, writer):
        with agent(harness, "ops", client="https://agent.example/meta.json"):
            assert call("restart_service", {"id": "shop_web_api"}, user="ops")["isError"] is False
        history = harness.app.test_client().get(f"/history?type=service&resourceId={SVC_WEB}",
                                                headers={"X-User": "ops", "Accept": "application/json"})
        assert history.status_code == 200, history.get_data(as_text=True)
        entry = history.get_json()["items"][0]
        assert entry["action"] == "update" and entry["summary"]
        stamp = entry["audit"]
        assert len(writer.writes) == 1
        assert stamp["identity"] == "ops" and stamp["via"] == "mcp" and stamp["tool"] == "restart_service"
        assert stamp["client"] == "https://agent.example/meta.json"
        assert stamp["requestId"]


def test_get_logs_and_search_read_paths() -> None:
    with running(operations_level=0, **ACL_SETTINGS) as (harness, _):
        with agent(harness, "reader"):
            found = call("search", {"query": "shop", "limit": 1}, user="reader")
            assert found["isError"] is False, text(found)
            assert found["structuredContent"]["query"] == "shop" and found["structuredContent"]["limit"] == 1
            assert "monitor" not in text(found)   # ACL-narrowed as GET /search
            blank = call("search", {"query": "  "}, user="reader")
            assert blank["isError"] is True
            hidden = call("get_logs", {"service": "monitor"}, user="reader")
            assert hidden["isError"] is True and "(ACL001)" in text(hidden)
            bad_since = call("get_logs", {"service": "shop_web_api", "since": "yesterday"}, user="reader")
            assert bad_since["isError"] is True and "(LOG003)" in text(bad_since)
        assert CFG_OTHER


def test_a_base_path_is_kept_for_the_inner_request() -> None:
    with running(operations_level=1, base_path="/shoal") as (harness, writer), \
            harness.app.test_request_context("/mcp", method="POST", base_url="http://localhost/shoal"):
        g.identity = None
        result = call("scale_service", {"id": SVC_WEB, "replicas": 3, "dryRun": True})
        assert result["isError"] is False, text(result)
        assert result["structuredContent"]["target"]["@id"] == f"/shoal/services/{SVC_WEB}"
        assert call("scale_service", {"id": SVC_WEB, "replicas": 3})["isError"] is False
        assert len(writer.writes) == 1
