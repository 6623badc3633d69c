"""``/metrics/status`` and ``/cluster/metrics`` from instant-query samples (a scripted client)."""

from __future__ import annotations

from app.metrics import cadvisor
from app.metrics.status import CADVISOR_NODES_QUERY, CADVISOR_QUERY, NODE_EXPORTER_QUERY, metrics_status
from app.metrics.upstream import PrometheusClient, Sample, UpstreamError
from app.metrics.usage import QUERIES, cluster_usage


class SampleClient(PrometheusClient):
    def __init__(self, answers: dict[str, list[Sample]], failure: UpstreamError | None = None) -> None:
        super().__init__("http://prom.invalid")
        self.answers = answers
        self.failure = failure

    def vector(self, promql: str) -> list[Sample]:
        if self.failure is not None:
            raise self.failure
        return self.answers.get(promql, [])


def test_unconfigured() -> None:
    assert metrics_status(None) == {"prometheusConfigured": False, "prometheusReachable": False,
                                    "nodeExporter": None, "cadvisor": None}


def test_unreachable_carries_the_error() -> None:
    status = metrics_status(SampleClient({}, UpstreamError("MTR002", "Prometheus is unreachable: refused.")))
    assert status == {"prometheusConfigured": True, "prometheusReachable": False, "nodeExporter": None,
                      "cadvisor": None, "error": "Prometheus is unreachable: refused."}


def test_coverage_counts_targets_and_nodes() -> None:
    node_id = cadvisor.LABELS["node_id"]
    client = SampleClient({
        NODE_EXPORTER_QUERY: [Sample({"instance": "a:9100", "nodename": "n1"}, 1),
                              Sample({"instance": "b:9100", "nodename": "n2"}, 1),
                              Sample({"instance": "c:9100", "nodename": "n2"}, 1)],
        CADVISOR_QUERY: [Sample({"instance": "a:8080"}, 1)],
        CADVISOR_NODES_QUERY: [Sample({node_id: "x"}, 3), Sample({node_id: "y"}, 1)],
    })
    status = metrics_status(client)
    assert status["prometheusReachable"] is True and "error" not in status
    assert status["nodeExporter"] == {"targets": 3, "nodes": 2}
    assert status["cadvisor"] == {"targets": 1, "nodes": 2}


def test_no_exporter_series_is_null() -> None:
    status = metrics_status(SampleClient({}))
    assert status["prometheusReachable"] is True
    assert status["nodeExporter"] is None and status["cadvisor"] is None


def test_usage_is_used_total_percent_per_resource() -> None:
    (cpu_total, cpu_used), (mem_total, mem_used), (disk_total, disk_used) = QUERIES.values()
    client = SampleClient({cpu_total: [Sample({}, 4)], cpu_used: [Sample({}, 1.23456)],
                           mem_total: [Sample({}, 8e9)], mem_used: [Sample({}, 2e9)],
                           disk_total: [Sample({}, 100.0)], disk_used: [Sample({}, 120.0)]})
    assert cluster_usage(client) == {
        "cpu": {"used": 1.235, "total": 4.0, "percent": 30.86},
        "memory": {"used": 2_000_000_000, "total": 8_000_000_000, "percent": 25.0},
        "disk": {"used": 100, "total": 100, "percent": 100.0},    # clamped to the total
    }


def test_usage_without_series_or_with_nan_is_null() -> None:
    cpu_total, cpu_used = QUERIES["cpu"]
    client = SampleClient({cpu_total: [Sample({}, 4)], cpu_used: [Sample({}, float("nan"))]})
    assert cluster_usage(client) == {"cpu": None, "memory": None, "disk": None}


def test_the_cadvisor_labels_are_the_swarm_labels() -> None:
    assert cadvisor.LABELS["service_name"] == "container_label_com_docker_swarm_service_name"
    assert cadvisor.LABELS["task_id"] == "container_label_com_docker_swarm_task_id"
    assert cadvisor.LABELS["node_id"] == "container_label_com_docker_swarm_node_id"
