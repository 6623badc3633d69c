"""``/metrics/status``: is Prometheus configured and reachable, and which exporters does it scrape.

Coverage is read from the series the exporters publish (not from job names, which are the operator's
choice): node-exporter publishes one ``node_uname_info`` per target (``nodename`` = host name), cAdvisor one
``cadvisor_version_info`` per target, and per container the swarm labels of ``app.metrics.cadvisor``.
``targets`` counts distinct ``instance`` values; ``nodes`` counts distinct hosts (node-exporter) or distinct
swarm node ids seen on containers (cAdvisor). An exporter with no series is ``null``.
"""

from __future__ import annotations

from typing import Any

from app.metrics import cadvisor
from app.metrics.upstream import PrometheusClient, UpstreamError

NODE_EXPORTER_QUERY = "count by (instance, nodename) (node_uname_info)"
CADVISOR_QUERY = f"count by (instance) ({cadvisor.VERSION_METRIC})"
_NODE_ID = cadvisor.LABELS["node_id"]
CADVISOR_NODES_QUERY = f'count by ({_NODE_ID}) ({cadvisor.LIVENESS_METRIC}{{{_NODE_ID}!=""}})'


def metrics_status(client: PrometheusClient | None) -> dict[str, Any]:
    status: dict[str, Any] = {"prometheusConfigured": client is not None, "prometheusReachable": False,
                              "nodeExporter": None, "cadvisor": None}
    if client is None:
        return status
    try:
        status["nodeExporter"] = _node_exporter(client)
        status["prometheusReachable"] = True
        status["cadvisor"] = _cadvisor(client)
    except UpstreamError as exc:
        status["error"] = exc.detail
    return status


def _node_exporter(client: PrometheusClient) -> dict[str, int] | None:
    samples = client.vector(NODE_EXPORTER_QUERY)
    if not samples:
        return None
    return {"targets": len({s.labels.get("instance", "") for s in samples}),
            "nodes": len({s.labels.get("nodename", "") for s in samples})}


def _cadvisor(client: PrometheusClient) -> dict[str, int] | None:
    targets = client.vector(CADVISOR_QUERY)
    if not targets:
        return None
    nodes = client.vector(CADVISOR_NODES_QUERY)
    return {"targets": len({s.labels.get("instance", "") for s in targets}),
            "nodes": len({s.labels.get(_NODE_ID, "") for s in nodes})}
