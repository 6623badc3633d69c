"""The cAdvisor metric and label names Shoal expects for per-container metrics (sizing checks, status).

cAdvisor (not packaged by Debian; see docs/metrics.md) exports every Docker container label as a Prometheus
label ``container_label_<label with non-alphanumerics as _>``. Swarm puts its task identity in labels
``com.docker.swarm.*`` on each task container, so these are the names by which a container's series are
tied back to a service, a task and a node. One constant, read by every later consumer.
"""

from __future__ import annotations

from typing import Final

LABELS: Final = {
    "service_name": "container_label_com_docker_swarm_service_name",
    "service_id": "container_label_com_docker_swarm_service_id",
    "task_id": "container_label_com_docker_swarm_task_id",
    "task_name": "container_label_com_docker_swarm_task_name",
    "node_id": "container_label_com_docker_swarm_node_id",
    "stack": "container_label_com_docker_stack_namespace",
}
"""Role → Prometheus label name on cAdvisor's ``container_*`` series."""

VERSION_METRIC: Final = "cadvisor_version_info"       # one series per cAdvisor target
LIVENESS_METRIC: Final = "container_last_seen"        # one series per container it sees
CPU_METRIC: Final = "container_cpu_usage_seconds_total"
MEMORY_METRIC: Final = "container_memory_working_set_bytes"
RESTARTS_HINT_METRIC: Final = "container_start_time_seconds"
