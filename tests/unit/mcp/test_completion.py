"""completion/complete for the resource templates: names starting with the value, then containing it, then
ids; only what the caller may read; at most 100 values with total and hasMore; tasks complete to ids."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.mcp.registry import INVALID_PARAMS
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.mcp.test_resources_support import ACL_SETTINGS, acl_app, call, call_error
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

__all__ = ["acl_app"]


def complete(harness: Harness, user: str, template: str, name: str, value: str) -> dict[str, Any]:
    result = call(harness, user, "completion/complete",
                  {"ref": {"type": "ref/resource", "uri": template}, "argument": {"name": name, "value": value}})
    completion: dict[str, Any] = result["completion"]
    return completion


def test_names_starting_with_the_value_come_first_then_those_containing_it(acl_app: Harness) -> None:
    found = complete(acl_app, "root", "service://services/{id}", "id", "shop")
    assert found == {"values": ["shop_db", "shop_web_api"], "total": 2, "hasMore": False}
    found = complete(acl_app, "root", "service://services/{id}", "id", "o")
    assert found["values"] == ["monitor", "shop_db", "shop_web_api"]
    found = complete(acl_app, "root", "service://services/{id}", "id", "WEB")   # case-insensitive
    assert found["values"] == ["shop_web_api"]
    assert complete(acl_app, "root", "service://services/{id}/logs", "id", "sh")["values"] == ["shop_db",
                                                                                                "shop_web_api"]


def test_ids_complete_too(acl_app: Harness) -> None:
    assert complete(acl_app, "root", "service://services/{id}", "id", "svcmon")["values"] == [o.SVC_MONITOR]
    assert complete(acl_app, "root", "service://nodes/{id}", "id", "worker")["values"] == ["worker-1", "worker-2"]


def test_only_readable_objects_are_offered(acl_app: Harness) -> None:
    assert complete(acl_app, "alice", "service://services/{id}", "id", "")["values"] == ["shop_db", "shop_web_api"]
    assert complete(acl_app, "bob", "service://services/{id}", "id", "")["values"] == ["monitor"]
    assert complete(acl_app, "nobody", "service://configs/{id}", "id", "")["total"] == 0
    assert complete(acl_app, "alice", "service://volumes/{name}", "name", "")["values"] == [o.VOL_SHOP]
    assert complete(acl_app, "root", "service://stacks/{name}", "name", "ho")["values"] == ["shop"]


def test_tasks_complete_to_ids_by_id_then_by_name(acl_app: Harness) -> None:
    assert complete(acl_app, "root", "service://tasks/{id}", "id", "taskweb")["values"] == [o.TASK_WEB_1,
                                                                                           o.TASK_WEB_2]
    by_name = complete(acl_app, "root", "service://tasks/{id}", "id", "shop_db.")["values"]
    assert sorted(by_name) == sorted([o.TASK_DB_1, o.TASK_DB_OLD])
    assert complete(acl_app, "bob", "service://tasks/{id}", "id", "shop")["values"] == []


@pytest.fixture(scope="module")
def crowded() -> Iterator[Harness]:
    objects = cluster()
    objects[ResourceKind.CONFIG] += [o.config(o.engine_id(f"cfgbulk{i:03d}"), f"bulk_{i:03d}") for i in range(150)]
    built = build_harness(FakeEngine(objects), **ACL_SETTINGS)
    built.start()
    try:
        yield built
    finally:
        built.stop()


def test_at_most_100_values_with_total_and_has_more(crowded: Harness) -> None:
    found = complete(crowded, "root", "service://configs/{id}", "id", "bulk_")
    assert len(found["values"]) == 100 and found["total"] == 150 and found["hasMore"] is True
    assert found["values"][:2] == ["bulk_000", "bulk_001"]
    assert complete(crowded, "root", "service://configs/{id}", "id", "bulk_14")["values"] == [
        f"bulk_14{i}" for i in range(10)]


@pytest.mark.parametrize("params", [
    {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "id", "value": ""}},
    {"ref": {"type": "ref/resource", "uri": "service://widgets/{id}"}, "argument": {"name": "id", "value": ""}},
    {"ref": {"type": "ref/resource", "uri": "service://services/{id}"}, "argument": {"name": "name", "value": ""}},
    {"ref": {"type": "ref/resource", "uri": "service://services/{id}"}, "argument": {"name": "id", "value": 3}},
    {"ref": {"type": "ref/resource", "uri": "service://services/{id}"}},
    {"ref": {"type": "ref/resource", "uri": "service://services/{id}"}, "argument": {"name": "id", "value": "x" * 300}},
])
def test_bad_params_are_invalid_params(acl_app: Harness, params: dict[str, Any]) -> None:
    assert call_error(acl_app, "root", "completion/complete", params).code == INVALID_PARAMS
