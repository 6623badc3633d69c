"""Each check on small fake clusters: it fires on the bad shape, stays quiet on the good one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.cache.entries import build_entry
from app.cache.store import Cache
from app.recommendations import checks
from app.recommendations.checks import Context
from app.recommendations.constraints import parse_placement
from app.recommendations.findings import Finding
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
NOW = 1_800_000_000.0
LONG_AGO = "2024-05-02T11:30:15.987654321Z"


def recent(seconds_ago: float) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).isoformat().replace("+00:00", "Z")


def good_service(service_id: str = o.SVC_WEB, name: str = "good", **overrides: Any) -> dict[str, Any]:
    raw = o.service(service_id, name, image="nginx:1.25", replicas=2)
    template = raw["Spec"]["TaskTemplate"]
    template["Resources"] = {"Limits": {"NanoCPUs": 500_000_000, "MemoryBytes": 64 << 20},
                             "Reservations": {"NanoCPUs": 100_000_000, "MemoryBytes": 32 << 20}}
    template["ContainerSpec"]["Healthcheck"] = {"Test": ["CMD", "true"]}
    for key, value in overrides.items():
        raw[key] = value
    return raw


def service_checks(cache: Cache, raw: dict[str, Any], context: Context | None = None) -> dict[str, Finding]:
    cache.upsert(K.SERVICE, copy.deepcopy(raw))   # the cache keeps the dict it is given
    entry = cache.get(K.SERVICE, raw["ID"])
    assert entry is not None
    found = checks.service_findings(cache, entry, parse_placement(raw), context or Context(NOW))
    return {finding.check: finding for finding in found}


def running_tasks(cache: Cache, service_id: str, count: int, node: str = o.NODE_WORKER) -> None:
    for slot in range(1, count + 1):
        cache.upsert(K.TASK, o.task(o.engine_id(f"t{service_id[:6]}{slot}"), service_id, node, slot=slot))


def test_a_well_configured_service_has_no_findings() -> None:
    cache = Cache()
    running_tasks(cache, o.SVC_WEB, 2)
    assert service_checks(cache, good_service()) == {}


def test_no_limits_names_what_is_missing() -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["Resources"]["Limits"] = {"MemoryBytes": 64 << 20}
    raw["Spec"]["TaskTemplate"]["Resources"]["Reservations"] = {"MemoryBytes": 1}
    found = service_checks(Cache(), raw)
    assert found["no-limits"].resource == "cpu" and found["no-limits"].severity == "warning"
    assert found["no-limits"].fix_action == f"PATCH /services/{o.SVC_WEB}/resources"
    assert "no-reservations" not in found
    raw["Spec"]["TaskTemplate"]["Resources"] = {}
    assert service_checks(Cache(), raw)["no-limits"].resource == "cpu+memory"


def test_no_reservations_fires_for_a_limit_without_its_reservation() -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["Resources"]["Reservations"] = {"NanoCPUs": 1}
    found = service_checks(Cache(), raw)
    assert found["no-reservations"].resource == "memory" and found["no-reservations"].severity == "info"


def test_single_replica_only_for_replicated_services_with_one() -> None:
    cache = Cache()
    running_tasks(cache, o.SVC_WEB, 1)
    raw = good_service()
    raw["Spec"]["Mode"] = {"Replicated": {"Replicas": 1}}
    assert service_checks(cache, raw)["single-replica"].severity == "info"
    raw["Spec"]["Mode"] = {"Global": {}}
    raw["Version"] = {"Index": 99}
    assert "single-replica" not in service_checks(cache, raw)


@pytest.mark.parametrize("healthcheck", [None, {"Test": ["NONE"]}, {"Test": []}])
def test_no_healthcheck(healthcheck: dict[str, Any] | None) -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["ContainerSpec"].pop("Healthcheck")
    if healthcheck is not None:
        raw["Spec"]["TaskTemplate"]["ContainerSpec"]["Healthcheck"] = healthcheck
    assert service_checks(Cache(), raw)["no-healthcheck"].severity == "warning"


def test_no_restart_policy() -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["RestartPolicy"] = {"Condition": "none"}
    assert "no-restart-policy" in service_checks(Cache(), raw)


@pytest.mark.parametrize(("image", "fires"), [
    ("nginx", True), ("nginx:latest", True), ("registry:5000/team/app", True), ("registry:5000/team/app:latest", True),
    ("nginx:1.25", False), ("registry:5000/team/app:2.1", False),
])
def test_image_without_a_tag_or_latest(image: str, fires: bool) -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = f"{image}@sha256:{'ab' * 32}"
    assert ("image-latest" in service_checks(Cache(), raw)) is fires


def test_restart_loop_counts_failures_within_the_look_back() -> None:
    cache = Cache()
    raw = good_service()
    for n, ago in enumerate((10, 70, 130, 4000)):
        task = o.task(o.engine_id(f"tfail{n}"), o.SVC_WEB, o.NODE_WORKER, state="failed", desired="shutdown",
                      error="task: non-zero exit (3)", updated=recent(ago))
        cache.upsert(K.TASK, task)
    found = service_checks(cache, raw)
    assert found["restart-loop"].severity == "critical"
    assert found["restart-loop"].message.startswith("3 tasks failed in the last 10 min")
    assert "non-zero exit (3)" in found["restart-loop"].message
    assert "restart-loop" not in service_checks(cache, raw, Context(NOW + 3600))


def test_replicas_not_running_after_the_grace() -> None:
    cache = Cache()
    running_tasks(cache, o.SVC_WEB, 1)
    raw = good_service()   # two desired, one running, spec changed long ago
    assert service_checks(cache, raw)["replicas-not-running"].severity == "warning"
    raw["UpdatedAt"] = recent(5)
    raw["Version"] = {"Index": 21}
    assert "replicas-not-running" not in service_checks(cache, raw)          # within the grace
    entry = cache.get(K.SERVICE, o.SVC_WEB)
    assert entry is not None and checks.grace_left(entry, Context(NOW)) == pytest.approx(25.0, abs=0.01)
    empty = Cache()
    assert service_checks(empty, good_service())["replicas-not-running"].severity == "critical"


def test_constraint_labels_no_node_has() -> None:
    raw = good_service()
    raw["Spec"]["TaskTemplate"]["Placement"] = {"Constraints": ["node.labels.zone == a", "node.labels.gpu==yes"]}
    found = service_checks(Cache(), raw, Context(NOW, node_labels=frozenset({"zone"})))
    assert found["constraint-label-missing"].severity == "critical"
    assert "node.labels.gpu == yes" in found["constraint-label-missing"].message
    assert "zone" not in found["constraint-label-missing"].message
    raw["Spec"]["TaskTemplate"]["Placement"] = {"Constraints": ["node.labels.gpu != yes"]}
    assert service_checks(Cache(), raw)["constraint-label-missing"].severity == "info"
    raw["Spec"]["TaskTemplate"]["Placement"] = {"Constraints": ["node.labels.gpu == yes"]}
    assert "constraint-label-missing" not in service_checks(Cache(), raw, Context(NOW, node_labels=frozenset({"gpu"})))


def test_node_down_with_pinned_services_and_tasks() -> None:
    cache = Cache()
    cache.replace_all(o.cluster())
    down = cache.get(K.NODE, o.NODE_DOWN)
    assert down is not None
    assert checks.node_findings(cache, down, Context(NOW)) == []       # its tasks are all shut down
    found = checks.node_findings(cache, down, Context(NOW, pinned={"worker-2": {o.SVC_DB}}))
    assert [(f.check, f.severity) for f in found] == [("node-unavailable-pinned", "critical")]
    assert "shop_db" in found[0].message
    cache.upsert(K.TASK, o.task(o.engine_id("stuck"), o.SVC_MONITOR, o.NODE_DOWN, slot=None, state="running"))
    found = checks.node_findings(cache, down, Context(NOW))
    assert [(f.check, f.severity) for f in found] == [("node-unavailable-pinned", "warning")]


def test_a_ready_active_worker_has_no_node_findings() -> None:
    cache = Cache()
    cache.replace_all(o.cluster())
    worker = cache.get(K.NODE, o.NODE_WORKER)
    assert worker is not None and checks.node_findings(cache, worker, Context(NOW, pinned={"worker-1": {"x"}})) == []


def test_manager_with_workloads() -> None:
    cache = Cache()
    cache.replace_all(o.cluster())
    manager = cache.get(K.NODE, o.NODE_MANAGER)
    assert manager is not None
    assert [f.check for f in checks.node_findings(cache, manager, Context(NOW))] == ["manager-has-workloads"]
    cache.upsert(K.NODE, o.node(o.NODE_MANAGER, "manager-1", role="manager", availability="drain", version=11))
    drained = cache.get(K.NODE, o.NODE_MANAGER)
    assert drained is not None
    assert "manager-has-workloads" not in [f.check for f in checks.node_findings(cache, drained, Context(NOW))]


@pytest.mark.parametrize(("managers", "fires"), [(1, True), (2, True), (3, False), (4, True), (5, False)])
def test_manager_quorum(managers: int, fires: bool) -> None:
    cache = Cache()
    cache.replace_all({K.NODE: [o.node(o.engine_id(f"m{i}"), f"m{i}", role="manager") for i in range(managers)]
                       + [o.node(o.NODE_WORKER, "worker-1")]})
    found = checks.cluster_findings(cache)
    assert bool(found) is fires
    if fires:
        assert found[0].id == "manager-quorum:cluster:swarm" and found[0].severity == "warning"


def test_unused_objects(synced_cache: Cache) -> None:
    unused = {}
    for kind in (K.CONFIG, K.SECRET, K.NETWORK, K.VOLUME):
        for entry in synced_cache.entries(kind):
            for finding in checks.unused_findings(synced_cache, entry):
                unused[finding.check] = [*unused.get(finding.check, []), entry.name]
    # tls_cert and scratch are used by nothing; bridge is a local network, the ingress the engine's.
    assert unused == {"unused-secret": ["tls_cert"], "unused-volume": ["scratch"]}


def test_an_overlay_network_used_by_nobody_is_unused() -> None:
    cache = Cache()
    cache.upsert(K.NETWORK, o.network(o.engine_id("netlonely"), "lonely"))
    entry = cache.get(K.NETWORK, o.engine_id("netlonely"))
    assert entry is not None
    assert [f.check for f in checks.unused_findings(cache, entry)] == ["unused-network"]


def test_every_check_id_is_listed() -> None:
    assert len(set(checks.CHECK_IDS)) == len(checks.CHECK_IDS) == 16
    assert build_entry(K.SERVICE, good_service()).name == "good"
