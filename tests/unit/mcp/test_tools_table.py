"""The tool table: the 23 tools, their tiers (the write table's), hints, input schemas, listing by level and
ACL, and argument validation."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.mcp.tool_schema import ArgumentError, check
from app.mcp.tool_table import TOOLS, tool
from app.writes.operations import OPERATIONS
from tests.unit.mcp.tools_support import ACL_SETTINGS, agent, call, listed, running, text

TIERS = {
    0: {"get_logs", "search"},
    1: {"scale_service", "update_service_image", "rollback_service", "restart_service", "remove_task"},
    2: {"update_service_env", "update_service_labels", "update_node_labels", "update_service_resources",
        "update_service_placement", "update_service_ports", "update_service_update_policy",
        "update_service_rollback_policy", "update_service_log_driver"},
    3: {"update_node_availability", "update_node_role", "remove_service", "remove_config", "remove_secret",
        "remove_network", "remove_volume"},
}
DESTRUCTIVE = {"update_service_image", "rollback_service", "restart_service", "remove_task",
               "update_service_placement", "update_service_ports", "update_node_availability", "update_node_role",
               "remove_service", "remove_config", "remove_secret", "remove_network", "remove_volume"}
NOT_IDEMPOTENT = {"rollback_service", "restart_service", "remove_task", "remove_service", "remove_config",
                  "remove_secret", "remove_network", "remove_volume"}


def test_twenty_three_tools_with_the_interface_tiers() -> None:
    assert len(TOOLS) == 23
    assert {t.name for t in TOOLS} == set().union(*TIERS.values())
    for tier, names in TIERS.items():
        assert {t.name for t in TOOLS if t.tier == tier} == names


def test_tiers_are_the_write_tables() -> None:
    for definition in TOOLS:
        rows = [row for row in OPERATIONS.values() if row.tool == definition.name]
        if definition.read_only:
            assert rows == [] and definition.tier == 0
        else:
            assert rows, definition.name
            assert {row.tier for row in rows} == {definition.tier}, definition.name
            assert definition.row is not None and definition.row.tool == definition.name


def test_all_four_hints_and_a_title() -> None:
    for definition in TOOLS:
        listing = definition.listing()
        hints = listing["annotations"]
        assert set(hints) == {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
        assert hints["readOnlyHint"] is (definition.name in TIERS[0])
        assert hints["destructiveHint"] is (definition.name in DESTRUCTIVE), definition.name
        assert hints["idempotentHint"] is (definition.name not in NOT_IDEMPOTENT), definition.name
        assert hints["openWorldHint"] is False
        assert listing["title"] and listing["description"]


def test_input_schemas_are_closed_objects_with_dry_run_on_writes() -> None:
    for definition in TOOLS:
        schema = definition.input_schema()
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        assert ("dryRun" in schema["properties"]) is (not definition.read_only), definition.name
    assert tool("remove_volume").input_schema()["required"] == ["name"]  # type: ignore[union-attr]
    assert set(tool("get_logs").input_schema()["properties"]) == {"service", "tail", "since", "level"}  # type: ignore[union-attr]
    assert set(tool("search").input_schema()["properties"]) == {"query", "limit"}  # type: ignore[union-attr]


@pytest.mark.parametrize(("level", "count"), [(0, 2), (1, 7), (2, 16), (3, 23)])
def test_listing_by_level(level: int, count: int) -> None:
    with running(mcp_operations_level=level, operations_level=0) as (harness, _), agent(harness):
        names = listed()
        assert len(names) == count
        assert all(tool(name).tier <= level for name in names)  # type: ignore[union-attr]


def test_listing_hides_what_the_identity_can_never_use() -> None:
    with running(operations_level=3, **ACL_SETTINGS) as (harness, _):
        with agent(harness, "ops"):
            ops = set(listed("ops"))
        with agent(harness, "reader"):
            reader = set(listed("reader"))
        with agent(harness, "noder"):
            noder = set(listed("noder"))
        with agent(harness, "nobody"):
            nobody = set(listed("nobody"))
    service_tools = {t.name for t in TOOLS if t.acl_types == ("service", "stack") and not t.read_only}
    assert ops == TIERS[0] | service_tools | {"remove_task"}
    assert reader == TIERS[0]
    assert noder == {"search", "update_node_labels", "update_node_availability", "update_node_role"}
    assert nobody == set()


@pytest.mark.parametrize(("arguments", "field", "reason"), [
    ({}, "arguments.id", "is required"),
    ({"id": "x"}, "arguments.replicas", "is required"),
    ({"id": "x", "replicas": "3"}, "arguments.replicas", "must be an integer"),
    ({"id": "x", "replicas": True}, "arguments.replicas", "must be an integer"),
    ({"id": "x", "replicas": 2.5}, "arguments.replicas", "must be an integer"),
    ({"id": "x", "replicas": -1}, "arguments.replicas", "must be at least 0"),
    ({"id": " ", "replicas": 1}, "arguments.id", "must not be empty"),
    ({"id": "x", "replicas": 1, "force": True}, "arguments.force", "is not a parameter of this tool"),
    ({"id": "x", "replicas": 1, "dryRun": "yes"}, "arguments.dryRun", "must be a boolean"),
])
def test_arguments_refused_name_the_field(arguments: dict[str, Any], field: str, reason: str) -> None:
    schema = tool("scale_service").input_schema()  # type: ignore[union-attr]
    with pytest.raises(ArgumentError) as raised:
        check(arguments, schema)
    assert (raised.value.field, raised.value.reason) == (field, reason)


def test_nested_and_enum_arguments() -> None:
    assert check({"id": "x", "replicas": 3.0}, tool("scale_service").input_schema())["replicas"] == 3  # type: ignore[union-attr]
    with pytest.raises(ArgumentError, match=r"arguments\.availability: must be one of active, pause, drain"):
        check({"id": "n", "availability": "off"}, tool("update_node_availability").input_schema())  # type: ignore[union-attr]
    with pytest.raises(ArgumentError, match=r"arguments\.env\['A'\]: must be a string or null"):
        check({"id": "s", "env": {"A": 1}}, tool("update_service_env").input_schema())  # type: ignore[union-attr]
    with pytest.raises(ArgumentError, match=r"arguments\.resources\.Limits\.NanoCPUs: must be an integer"):
        check({"id": "s", "resources": {"Limits": {"NanoCPUs": "1"}}},
              tool("update_service_resources").input_schema())  # type: ignore[union-attr]
    with pytest.raises(ArgumentError, match=r"arguments\.ports\[0\]\.TargetPort: is required"):
        check({"id": "s", "ports": [{"PublishedPort": 80}]}, tool("update_service_ports").input_schema())  # type: ignore[union-attr]


def test_calls_refused_before_anything_runs() -> None:
    with running(mcp_operations_level=1, operations_level=3) as (harness, writer), agent(harness):
        unknown = call("drop_database", {})
        assert unknown["isError"] is True and text(unknown) == "Unknown tool: drop_database"
        above = call("remove_service", {"id": "shop_db"})
        assert above["isError"] is True
        assert "needs operations level 3 (impactful); the agents' level is 1 (operational)" in text(above)
        assert above["structuredContent"] == {"tool": "remove_service", "requiredLevel": 3, "configuredLevel": 1}
        bad = call("scale_service", {"id": "shop_web_api"})
        assert bad["isError"] is True and text(bad) == "Invalid arguments: arguments.replicas: is required"
        assert bad["structuredContent"] == {"field": "arguments.replicas", "reason": "is required"}
        not_object = call("scale_service", ["x"])  # type: ignore[arg-type]
        assert not_object["isError"] is True
        assert writer.writes == []


def test_a_call_without_a_name_is_invalid_params() -> None:
    from app.mcp.registry import INVALID_PARAMS, METHODS, CallContext, RpcError
    from tests.unit.mcp.tools_support import identity

    with running() as (harness, _), agent(harness):
        with pytest.raises(RpcError) as raised:
            METHODS["tools/call"](CallContext(identity(None), "2025-11-25"), {"arguments": {}})
        assert raised.value.code == INVALID_PARAMS
