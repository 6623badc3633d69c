"""The Prometheus checks over hand-written vectors: thresholds (at, just above, below), rounding of the
suggested values, exporter-instance → node hostname mapping, and the periodic runner: no Prometheus → no
greenlet, Prometheus down → no crash, findings kept for STALE_RUNS - 1 failed runs then dropped."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from app.cache.entries import Entry
from app.cache.store import Cache
from app.http.recommendations import parse_filter
from app.metrics.cadvisor import LABELS
from app.metrics.upstream import PrometheusClient, Sample, UpstreamError
from app.recommendations import prometheus_checks as pc
from app.recommendations.engine import EngineSettings, RecommendationEngine
from app.recommendations.findings import Finding
from app.recommendations.prometheus_checks import (
    MetricFinding,
    PrometheusChecks,
    ServiceUsage,
    node_findings,
    restarts,
    service_findings,
    suggested_cpu,
    suggested_memory,
)
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import cluster

MIB = 1024 * 1024
GIB = 1024 * MIB
NOW = 1_800_000_000.0
SVC = LABELS["service_name"]
TASK = LABELS["task_name"]


def sample(value: float, **labels: str) -> Sample:
    return Sample(dict(labels), value)


@pytest.fixture
def cache() -> Cache:
    objects = cluster()
    web = objects[ResourceKind.SERVICE][0]
    web["Spec"]["TaskTemplate"]["Resources"] = {
        "Limits": {"NanoCPUs": 1_000_000_000, "MemoryBytes": 1024 * MIB},
        "Reservations": {"NanoCPUs": 1_000_000_000, "MemoryBytes": 1024 * MIB}}
    cache = Cache()
    cache.replace_all(objects)
    return cache


def nodes(cache: Cache) -> list[Entry]:
    return list(cache.entries(ResourceKind.NODE))


def services(cache: Cache) -> list[Entry]:
    return list(cache.entries(ResourceKind.SERVICE))


# ---------------------------------------------------------------------------------------------- rounding
@pytest.mark.parametrize(("cores", "nano"), [
    (0.25, 500_000_000),        # 0.5 exactly: no float overshoot to 0.55
    (0.26, 550_000_000),        # 0.52 → up to 0.55
    (0.001, 50_000_000),        # minimum 0.05 core
    (0.0, 50_000_000),
    (1.5, 3_000_000_000),
])
def test_suggested_cpu_rounds_up_to_a_twentieth_of_a_core(cores: float, nano: int) -> None:
    assert suggested_cpu(cores) == nano


@pytest.mark.parametrize(("used", "suggested"), [
    (32 * MIB, 64 * MIB),        # 64 MiB exactly
    (100 * MIB, 256 * MIB),      # 200 MiB → up to 256
    (0, 64 * MIB),               # minimum 64 MiB
    (1, 64 * MIB),
    (512 * MIB + 1, 1088 * MIB),
])
def test_suggested_memory_rounds_up_to_64_mib(used: float, suggested: int) -> None:
    assert suggested_memory(used) == suggested


# ---------------------------------------------------------------------------------------------- nodes
def node_vectors(disk_used: float, mem_used: float, nodename: str = "worker-1") -> dict[str, list[Sample]]:
    instance = "10.0.0.2:9100"
    return {
        "uname": [sample(1, instance=instance, nodename=nodename),
                  sample(1, instance="10.0.0.9:9100", nodename="not-in-swarm")],
        "fs_size": [sample(100 * GIB, instance=instance, mountpoint="/"),
                    sample(100 * GIB, instance="10.0.0.9:9100", mountpoint="/")],
        "fs_avail": [sample(100 * GIB * (1 - disk_used), instance=instance, mountpoint="/"),
                     sample(0, instance="10.0.0.9:9100", mountpoint="/")],
        "mem_total": [sample(16 * GIB, instance=instance), sample(16 * GIB, instance="10.0.0.9:9100")],
        "mem_avail": [sample(16 * GIB * (1 - mem_used), instance=instance), sample(0, instance="10.0.0.9:9100")],
    }


def run_nodes(cache: Cache, vectors: dict[str, list[Sample]]) -> list[Finding]:
    return node_findings(nodes(cache), vectors["uname"], vectors["fs_size"], vectors["fs_avail"],
                         vectors["mem_total"], vectors["mem_avail"])


def test_healthy_nodes_and_thresholds_exactly_at_90_percent_give_nothing(cache: Cache) -> None:
    assert run_nodes(cache, node_vectors(0.5, 0.5)) == []
    assert run_nodes(cache, node_vectors(0.90, 0.90)) == []


def test_disk_and_memory_above_90_percent_are_critical_on_the_node_with_that_hostname(cache: Cache) -> None:
    found = run_nodes(cache, node_vectors(0.905, 0.95))
    assert sorted(f.id for f in found) == [f"node-disk-full:node:{o.NODE_WORKER}",
                                           f"node-memory-pressure:node:{o.NODE_WORKER}"]
    assert {f.severity for f in found} == {"critical"}
    assert {f.resource_name for f in found} == {"worker-1"}
    assert {f.fix_action for f in found} == {f"PUT /nodes/{o.NODE_WORKER}/availability"}
    memory = next(f for f in found if f.check == "node-memory-pressure")
    assert isinstance(memory, MetricFinding)
    body = memory.to_json("")
    assert body["resource"] == "memory"
    assert body["configured"] == 16 * GIB
    assert body["current"] == int(16 * GIB * 0.95)
    assert "90.5 % full" in next(f for f in found if f.check == "node-disk-full").message


def test_hostname_mapping_ignores_exporters_of_unknown_hosts(cache: Cache) -> None:
    """The exporter of "not-in-swarm" is full but maps to no node; "manager-1" maps to the manager."""
    assert run_nodes(cache, node_vectors(0.5, 0.5, nodename="elsewhere")) == []
    found = run_nodes(cache, node_vectors(0.99, 0.5, nodename="manager-1"))
    assert [(f.check, f.resource_id) for f in found] == [("node-disk-full", o.NODE_MANAGER)]


# ---------------------------------------------------------------------------------------------- services
def usage(cpu: float | None = None, memory: float | None = None, cpu_p95: float | None = None,
          memory_p95: float | None = None, starts: list[Sample] | None = None) -> ServiceUsage:
    def vector(value: float | None) -> list[Sample]:
        return [] if value is None else [sample(value, **{SVC: "shop_web_api"})]
    return ServiceUsage(vector(cpu), vector(memory), vector(cpu_p95), vector(memory_p95), starts or [])


def checks_of(found: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in found}


@pytest.mark.parametrize(("cpu", "expected"), [
    (0.80, None), (0.81, "approaching-limit"), (0.95, "approaching-limit"), (0.96, "at-limit")])
def test_cpu_limit_thresholds(cache: Cache, cpu: float, expected: str | None) -> None:
    found = checks_of(service_findings(services(cache), usage(cpu=cpu), NOW, 600))
    assert list(found) == ([expected] if expected else [])
    if expected:
        finding = found[expected]
        assert isinstance(finding, MetricFinding)
        assert (finding.resource, finding.current, finding.configured) == ("cpu", cpu * 100, 100.0)
        assert finding.suggested == suggested_cpu(cpu)
        assert finding.severity == ("critical" if expected == "at-limit" else "warning")
        assert finding.fix_action == f"PATCH /services/{o.SVC_WEB}/resources"


def test_memory_at_limit_and_cpu_approaching_are_two_findings(cache: Cache) -> None:
    found = checks_of(service_findings(services(cache), usage(cpu=0.85, memory=1000 * MIB), NOW, 600))
    assert set(found) == {"approaching-limit", "at-limit"}
    assert found["at-limit"].resource == "memory"
    assert found["approaching-limit"].resource == "cpu"
    at = found["at-limit"]
    assert isinstance(at, MetricFinding) and at.suggested == 2048 * MIB and at.configured == 1024 * MIB


def test_both_at_limit_is_one_cpu_plus_memory_finding_with_figures_by_resource(cache: Cache) -> None:
    found = service_findings(services(cache), usage(cpu=1.2, memory=1020 * MIB), NOW, 600)
    assert len(found) == 1
    body = found[0].to_json("")
    assert body["resource"] == "cpu+memory"
    assert body["current"] == {"cpu": 120.0, "memory": 1020 * MIB}
    assert body["suggested"] == {"cpu": 2_400_000_000, "memory": 2048 * MIB}


def test_memory_exactly_at_80_percent_gives_nothing(cache: Cache) -> None:
    assert service_findings(services(cache), usage(memory=0.8 * 1024 * MIB), NOW, 600) == []


def test_over_provisioned_below_20_percent_of_the_reservation(cache: Cache) -> None:
    assert service_findings(services(cache), usage(cpu_p95=0.2, memory_p95=0.2 * 1024 * MIB), NOW, 600) == []
    found = service_findings(services(cache), usage(cpu_p95=0.19), NOW, 600)
    assert [(f.check, f.severity, f.resource) for f in found] == [("over-provisioned", "info", "cpu")]
    assert isinstance(found[0], MetricFinding) and found[0].suggested == 400_000_000


def test_services_without_limits_or_series_give_nothing(cache: Cache) -> None:
    other = ServiceUsage([sample(5.0, **{SVC: "shop_db"}), sample(9.0, **{SVC: "gone"})])
    assert service_findings(services(cache), other, NOW, 600) == []


def starts(service: str, slot: str, *times: float) -> list[Sample]:
    return [sample(t, **{SVC: service, TASK: f"{service}.{slot}.task{i}"}) for i, t in enumerate(times)]


def test_restarts_count_new_containers_per_slot() -> None:
    old = NOW - 3600
    vector = (starts("web", "1", old, *[NOW - 60 * i for i in range(1, 7)])   # 6 restarts of a running slot
              + starts("web", "2", *[NOW - 60 * i for i in range(1, 6)])       # new slot: 5 starts, 4 restarts
              + starts("db", "1", old))                                         # no restart
    assert restarts(vector, NOW, 600) == {"web": 10}


@pytest.mark.parametrize(("count", "flaky"), [(5, False), (6, True)])
def test_flaky_service_above_5_restarts(cache: Cache, count: int, flaky: bool) -> None:
    vector = starts("shop_web_api", "1", NOW - 3600, *[NOW - 10 * i for i in range(1, count + 1)])
    found = service_findings(services(cache), usage(starts=vector), NOW, 600)
    assert [f.check for f in found] == (["flaky-service"] if flaky else [])
    if flaky:
        assert found[0].severity == "warning" and found[0].message.startswith("6 container restarts")


def test_the_check_ids_are_known_to_the_filter() -> None:
    check_filter = parse_filter({"check": ",".join(pc.PROMETHEUS_CHECK_IDS)})
    assert check_filter.checks == frozenset(pc.PROMETHEUS_CHECK_IDS)


# ---------------------------------------------------------------------------------------------- runner
class FakeClient:
    def __init__(self, vectors: dict[str, list[Sample]]) -> None:
        self.vectors = vectors
        self.down = False
        self.queries = {promql: key for key, promql in pc._queries(600).items()}

    def vector(self, promql: str) -> list[Sample]:
        if self.down:
            raise UpstreamError("MTR002", "Prometheus is unreachable: Connection refused.")
        return self.vectors.get(self.queries[promql], [])

    def close(self) -> None:
        pass


def test_no_prometheus_url_means_no_greenlet(cache: Cache) -> None:
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01))
    engine.start()
    try:
        assert engine.prometheus is None
    finally:
        engine.stop()


@pytest.fixture
def engine(cache: Cache) -> Iterator[RecommendationEngine]:
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01), clock=lambda: NOW)
    engine.start()
    engine.evaluate_now()
    yield engine
    engine.stop()


def prometheus_ids(engine: RecommendationEngine) -> set[str]:
    return {f.id for f in engine.findings() if f.check in pc.PROMETHEUS_CHECK_IDS}


def test_findings_merge_into_the_store_and_survive_engine_runs(engine: RecommendationEngine,
                                                               cache: Cache) -> None:
    vectors: dict[str, Any] = {**node_vectors(0.95, 0.5), "cpu": usage(cpu=0.99).cpu}
    client = FakeClient(vectors)
    seen: list[Any] = []
    engine.subscribe(seen.extend)
    runner = PrometheusChecks(cache, client, engine.publish, 600, lambda: NOW)  # type: ignore[arg-type]
    runner.run_once()
    expected = {f"node-disk-full:node:{o.NODE_WORKER}", f"at-limit:service:{o.SVC_WEB}"}
    assert prometheus_ids(engine) == expected
    assert {change.finding.id for change in seen} == expected
    engine._mark_everything()
    engine.evaluate_now()                      # the engine's own checks do not replace them
    assert prometheus_ids(engine) == expected
    assert "no-healthcheck:service:" + o.SVC_WEB in {f.id for f in engine.findings()}

    client.down = True                         # Prometheus down: kept for STALE_RUNS - 1 runs, then dropped
    for _ in range(pc.STALE_RUNS - 1):
        runner.run_once()
        assert prometheus_ids(engine) == expected
    runner.run_once()
    assert prometheus_ids(engine) == set()
    assert runner.failures == {pc.NODES: pc.STALE_RUNS, pc.SERVICES: pc.STALE_RUNS}

    client.down = False
    vectors["fs_avail"] = node_vectors(0.5, 0.5)["fs_avail"]
    runner.run_once()
    assert prometheus_ids(engine) == {f"at-limit:service:{o.SVC_WEB}"}
    assert runner.failures == {pc.NODES: 0, pc.SERVICES: 0}


def test_unreachable_prometheus_does_not_crash_the_engine(cache: Cache) -> None:
    with socket.socket() as sock:              # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01, prometheus_url=f"http://127.0.0.1:{port}"))
    engine.start()
    try:
        assert engine.prometheus is not None
        engine.prometheus.run_once()
        assert engine.prometheus.failures == {pc.NODES: 1, pc.SERVICES: 1}
        assert engine.prometheus.runs == 1
    finally:
        engine.stop()
    assert engine.prometheus is None


def test_a_real_client_is_bounded(cache: Cache) -> None:
    engine = RecommendationEngine(cache, EngineSettings(prometheus_url="http://127.0.0.1:1"))
    engine.start()
    try:
        assert engine.prometheus is not None
        client = engine.prometheus._client
        assert isinstance(client, PrometheusClient) and client.limits.total_timeout <= pc.RUN_TIMEOUT
    finally:
        engine.stop()
