"""app.cluster over a small synthetic cache: overview counts, capacity per node and in
total, and stack summaries."""

from __future__ import annotations

from typing import Any

import pytest

from app.cache.store import Cache
from app.cluster.capacity import capacity
from app.cluster.overview import overview
from app.cluster.stacks import summaries
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
CPU, GIB = 1_000_000_000, 1024 ** 3


def cache_of(objects: dict[ResourceKind, list[o.Raw]]) -> Cache:
    cache = Cache()
    cache.replace_all(objects, cache.write_token(), 0.01)
    return cache


def reserve(raw: dict[str, Any], cpus: float, memory: int, *, limit: bool = False) -> None:
    """Set a service's (or a task's) reservation, or its limit."""
    spec = raw["Spec"]
    resources = spec["TaskTemplate"]["Resources"] if "TaskTemplate" in spec else spec["Resources"]
    resources["Limits" if limit else "Reservations"] = {"NanoCPUs": int(cpus * CPU), "MemoryBytes": memory}


def test_overview_counts_nodes_services_tasks_and_states(synced_cache: Cache) -> None:
    body = overview(synced_cache, prometheus_configured=False, local_node_id=None)
    assert body["nodeCount"] == 3 and body["serviceCount"] == 3 and body["taskCount"] == 7
    assert body["stackCount"] == 1
    assert body["tasksByState"] == {"failed": 1, "pending": 1, "running": 4, "shutdown": 1}
    assert (body["nodesReady"], body["nodesDown"], body["nodesDraining"]) == (2, 1, 1)
    assert body["totalCPU"] == 12 and body["totalMemory"] == 3 * 8_589_934_592
    assert body["prometheusConfigured"] is False
    assert "localNodeID" not in body


def test_overview_converged_and_degraded_services(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    objects[K.TASK].pop(1)   # shop_web_api: 1 of 2 running → degraded; db 1/1 and global monitor converged
    body = overview(cache_of(objects), prometheus_configured=True, local_node_id="abc")
    assert (body["servicesConverged"], body["servicesDegraded"]) == (2, 1)
    assert body["localNodeID"] == "abc" and body["prometheusConfigured"] is True


def test_overview_reserved_is_reservation_times_desired_tasks(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    web, db, monitor = objects[K.SERVICE]
    reserve(web, 0.5, 100)       # 2 replicas
    reserve(db, 0.25, 1000)      # 1 replica
    reserve(monitor, 0.1, 7)     # global: 2 tasks desired running (the down node's task is shut down)
    body = overview(cache_of(objects), prometheus_configured=False, local_node_id=None)
    assert body["reservedCPU"] == 2 * CPU // 2 + CPU // 4 + 2 * CPU // 10
    assert body["reservedMemory"] == 2 * 100 + 1000 + 2 * 7


def test_overview_of_an_empty_cache() -> None:
    body = overview(Cache(), prometheus_configured=False, local_node_id=None)
    assert body["nodeCount"] == 0 and body["tasksByState"] == {} and body["totalCPU"] == 0


def test_overview_tally_spans_parts(monkeypatch: pytest.MonkeyPatch, objects: dict[ResourceKind, list[o.Raw]]) -> None:
    """The task tally in parts (a loop turn between two) counts every task exactly once."""
    import app.cluster.overview as module

    turns: list[int] = []
    monkeypatch.setattr(module, "PART", 2)
    monkeypatch.setattr(module, "pause", lambda: turns.append(1))
    body = overview(cache_of(objects), prometheus_configured=False, local_node_id=None)
    assert sum(body["tasksByState"].values()) == 7 and len(turns) == 3


def test_capacity_reserves_only_tasks_holding_their_node(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    for task in objects[K.TASK]:
        reserve(task, 0.5, GIB)
    body = capacity(cache_of(objects))
    assert (body["maxNodeCPU"], body["maxNodeMemory"], body["totalCPU"], body["nodeCount"]) == (4, 8 * GIB, 12, 3)
    nodes = {node["hostname"]: node for node in body["nodes"]}
    assert list(nodes) == ["manager-1", "worker-1", "worker-2"]
    # manager: web.1 + monitor (running); worker-1: web.2, db.1 running, monitor pending (not yet holding);
    # worker-2: a failed and a shut-down task (desired shutdown): nothing.
    assert nodes["manager-1"]["cpu"] == {"total": 4.0, "reserved": 1.0, "available": 3.0}
    assert nodes["worker-1"]["memory"] == {"total": 8 * GIB, "reserved": 2 * GIB, "available": 6 * GIB}
    assert nodes["worker-2"]["cpu"]["reserved"] == 0.0
    assert body["reserved"] == {"cpu": 2.0, "memory": 4 * GIB}
    assert body["available"] == {"cpu": 10.0, "memory": 20 * GIB}


def test_capacity_available_is_never_negative(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    for task in objects[K.TASK]:
        reserve(task, 3, 5 * GIB)   # manager: 2 running tasks reserve 6 cores on 4
    nodes = {node["hostname"]: node for node in capacity(cache_of(objects))["nodes"]}
    assert nodes["manager-1"]["cpu"] == {"total": 4.0, "reserved": 6.0, "available": 0.0}
    assert nodes["manager-1"]["memory"]["available"] == 0


def test_stack_summary_counts_members_tasks_and_limits(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    web, db, _ = objects[K.SERVICE]
    reserve(web, 0.5, 64 * 1024 ** 2, limit=True)   # times 2 replicas
    web["UpdateStatus"] = {"State": "updating"}
    db["UpdateStatus"] = {"State": "completed"}
    (row,) = summaries(cache_of(objects))
    assert row == {
        "name": "shop", "serviceCount": 2, "configCount": 1, "secretCount": 1, "networkCount": 1,
        "volumeCount": 1, "desiredTasks": 3, "tasksByState": {"failed": 1, "running": 3},
        "updatingServices": 1, "memoryLimitBytes": 128 * 1024 ** 2, "cpuLimitCores": 1.0,
        "memoryUsageBytes": None, "cpuUsagePercent": None}


def test_stack_summaries_are_sorted_by_name(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    objects[K.SERVICE].append(o.service(o.engine_id("svcalpha"), "alpha_one", stack="alpha", replicas=3))
    rows = summaries(cache_of(objects))
    assert [row["name"] for row in rows] == ["alpha", "shop"]
    assert rows[0]["desiredTasks"] == 3 and rows[0]["tasksByState"] == {} and rows[0]["configCount"] == 0
