"""``/cluster/metrics``: CPU, memory and root-disk use of the whole cluster, from node-exporter series.

Each is ``{used, total, percent}``: CPU in cores (used = cores - idle rate over the last minute), memory in
bytes (used = MemTotal - MemAvailable), disk in bytes for the root filesystem (used = size - avail). Sums run
over every node-exporter target, so one exporter per node (a global service) is assumed; a resource with
no series is ``null``.
"""

from __future__ import annotations

import math
from typing import Any, Final

from app.metrics.upstream import PrometheusClient

QUERIES: Final = {
    "cpu": ('count(node_cpu_seconds_total{mode="idle"})',
            'count(node_cpu_seconds_total{mode="idle"}) - sum(rate(node_cpu_seconds_total{mode="idle"}[1m]))'),
    "memory": ("sum(node_memory_MemTotal_bytes)",
               "sum(node_memory_MemTotal_bytes) - sum(node_memory_MemAvailable_bytes)"),
    "disk": ('sum(node_filesystem_size_bytes{mountpoint="/"})',
             'sum(node_filesystem_size_bytes{mountpoint="/"}) - sum(node_filesystem_avail_bytes{mountpoint="/"})'),
}
"""resource → (total, used) PromQL."""


def cluster_usage(client: PrometheusClient) -> dict[str, Any]:
    """:raises UpstreamError: Prometheus unreachable or refusing a query."""
    return {resource: _usage(client, total_query, used_query, whole=resource != "cpu")
            for resource, (total_query, used_query) in QUERIES.items()}


def _usage(client: PrometheusClient, total_query: str, used_query: str, *, whole: bool
           ) -> dict[str, float | int] | None:
    total = _single(client, total_query)
    used = _single(client, used_query)
    if total is None or used is None or not (math.isfinite(total) and math.isfinite(used)) or total <= 0:
        return None
    used = min(max(used, 0.0), total)
    percent = round(used / total * 100, 2)
    if whole:
        return {"used": int(used), "total": int(total), "percent": percent}
    return {"used": round(used, 3), "total": round(total, 3), "percent": percent}


def _single(client: PrometheusClient, promql: str) -> float | None:
    samples = client.vector(promql)
    return samples[0].value if samples else None
