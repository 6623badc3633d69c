"""The Prometheus checks: node pressure from node-exporter, container sizing from cAdvisor
(docs/search-and-recommendations.md).

Why separate from ``checks``: these read metrics, not the cache, and run on a timer (every 5 min) instead of
on cache changes. The functions here are pure (decoded instant vectors + cache entries → findings); the
:class:`PrometheusChecks` greenlet queries Prometheus and hands each group's findings to the engine, which
replaces them in its store under one subject per group (``("prometheus", "nodes")``,
``("prometheus", "services")``), so the engine's own evaluations never touch them and vice versa.

| check id             | severity | fires when                                                              |
|----------------------|----------|-------------------------------------------------------------------------|
| node-disk-full       | critical | root filesystem (mountpoint /) used > 90 %                             |
| node-memory-pressure | critical | memory used (MemTotal - MemAvailable) > 90 %                           |
| at-limit             | critical | a container's CPU (1 min rate) or working set > 0.95 x its limit       |
| approaching-limit    | warning  | > 0.80 x the limit (and not at-limit for that resource)                |
| over-provisioned     | info     | p95 over the look-back < 0.20 x the reservation                        |
| flaky-service        | warning  | > 5 container restarts (new containers in a slot) within the look-back |

Exporter instances are tied to swarm nodes by hostname (``node_uname_info{nodename}`` = the node's
``Description.Hostname``); containers to services by cAdvisor's swarm labels (``app.metrics.cadvisor``). A
series without a matching node or service is ignored. When a group's queries fail (Prometheus down), its
previous findings are kept for ``STALE_RUNS - 1`` more periods and dropped at the ``STALE_RUNS``-th failure
in a row: an outage is no fix, but findings must not outlive their evidence forever.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import gevent
from gevent import Greenlet

from app.cache.entries import Entry, dig
from app.cache.store import Cache
from app.metrics.cadvisor import CPU_METRIC, LABELS, MEMORY_METRIC, RESTARTS_HINT_METRIC
from app.metrics.upstream import Limits, PrometheusClient, Sample, UpstreamError
from app.recommendations.findings import Finding
from app.resources import ResourceKind

log = logging.getLogger(__name__)

DISK_FULL: Final = 0.90
MEMORY_PRESSURE: Final = 0.90
APPROACHING_LIMIT: Final = 0.80
AT_LIMIT: Final = 0.95
OVER_PROVISIONED: Final = 0.20
FLAKY_RESTARTS: Final = 5
HEADROOM: Final = 2.0
INTERVAL: Final = 300.0          # seconds between two runs (every 5 min)
FIRST_DELAY: Final = 15.0        # the first run, shortly after start (targets scraped, cache synced)
RUN_TIMEOUT: Final = 60.0        # one whole run, all queries
QUERY_LIMITS: Final = Limits(total_timeout=15.0, connect_timeout=5.0, max_bytes=10 * 1024 * 1024)
STALE_RUNS: Final = 3            # failed runs in a row after which a group's findings are dropped
CPU_STEP: Final = 0.05           # suggested CPU: multiples of 0.05 core
MEMORY_STEP: Final = 64 * 1024 * 1024
PROMETHEUS_CHECK_IDS: Final = ("approaching-limit", "at-limit", "over-provisioned", "flaky-service",
                               "node-disk-full", "node-memory-pressure")
NODES: Final = ("prometheus", "nodes")
SERVICES: Final = ("prometheus", "services")

Publish = Callable[[tuple[str, str], list[Finding]], None]


@dataclass(slots=True)
class MetricFinding(Finding):
    """A finding with its measured figures: CPU in percent of one core, memory in bytes; suggested
    CPU in NanoCPUs. A scalar for one resource, ``{"cpu": .., "memory": ..}`` for ``cpu+memory``."""

    current: Any = None
    configured: Any = None
    suggested: Any = None

    def same_report(self, other: Finding) -> bool:
        figures = (self.current, self.configured, self.suggested)
        theirs = ((other.current, other.configured, other.suggested) if isinstance(other, MetricFinding)
                  else (None, None, None))
        return Finding.same_report(self, other) and figures == theirs

    def to_json(self, base: str) -> dict[str, Any]:
        data = Finding.to_json(self, base)
        for key in ("current", "configured", "suggested"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


# ---------------------------------------------------------------------------------------------- rounding
def suggested_cpu(cores: float) -> int:
    """NanoCPUs for ``cores`` x headroom, rounded up to 0.05 core, at least 0.05."""
    steps = math.ceil(round(cores * HEADROOM / CPU_STEP, 6))
    return max(steps, 1) * 50_000_000


def suggested_memory(used: float) -> int:
    """Bytes for ``used`` x headroom, rounded up to 64 MiB, at least 64 MiB."""
    wanted = math.ceil(used * HEADROOM)          # whole bytes: exact, no float noise at 64 MiB multiples
    return max(-(-wanted // MEMORY_STEP), 1) * MEMORY_STEP


def cpu_percent(cores: float) -> float:
    return round(cores * 100, 1)


# ---------------------------------------------------------------------------------------------- nodes
def _by_instance(samples: Iterable[Sample]) -> dict[str, float]:
    values: dict[str, float] = {}
    for sample in samples:
        instance = sample.labels.get("instance", "")
        if instance and instance not in values and math.isfinite(sample.value):
            values[instance] = sample.value
    return values


def node_findings(nodes: Iterable[Entry], uname: Iterable[Sample], fs_size: Iterable[Sample],
                  fs_avail: Iterable[Sample], mem_total: Iterable[Sample], mem_avail: Iterable[Sample],
                  ) -> list[Finding]:
    """Disk and memory pressure per swarm node; exporter instance → ``nodename`` → node hostname."""
    by_host = {node.name: node for node in nodes if node.name}
    instances = {s.labels["instance"]: by_host[s.labels.get("nodename", "")] for s in uname
                 if s.labels.get("instance") and s.labels.get("nodename", "") in by_host}
    found: list[Finding] = []
    sizes, avails = _by_instance(fs_size), _by_instance(fs_avail)
    totals, availables = _by_instance(mem_total), _by_instance(mem_avail)
    for instance, node in sorted(instances.items(), key=lambda item: item[1].name):
        size, avail = sizes.get(instance), avails.get(instance)
        if size and avail is not None and size > 0 and (size - avail) / size > DISK_FULL:
            used = (size - avail) / size
            found.append(Finding("node-disk-full", "critical", "node", node.id, node.name,
                                 f"Root filesystem {used * 100:.1f} % full ({_gib(size - avail)} of "
                                 f"{_gib(size)}): containers, logs and images will fail to write.",
                                 "Free space (docker system prune, log rotation) or grow the disk; drain the "
                                 "node meanwhile.", f"PUT /nodes/{node.id}/availability"))
        total, available = totals.get(instance), availables.get(instance)
        if total and available is not None and total > 0 and (total - available) / total > MEMORY_PRESSURE:
            used_bytes = int(total - available)
            found.append(MetricFinding("node-memory-pressure", "critical", "node", node.id, node.name,
                                       f"Memory {used_bytes / total * 100:.1f} % used ({_gib(used_bytes)} of "
                                       f"{_gib(total)}): the kernel will kill containers.",
                                       "Move or limit workloads (drain the node, set memory limits) or add "
                                       "memory.", f"PUT /nodes/{node.id}/availability", "memory",
                                       current=used_bytes, configured=int(total)))
    return found


def _gib(value: float) -> str:
    return f"{value / 1024 ** 3:.1f} GiB"


# ---------------------------------------------------------------------------------------------- services
@dataclass(frozen=True, slots=True)
class ServiceUsage:
    """Decoded cAdvisor vectors, each ``by (service name)`` except ``starts`` (one per container)."""

    cpu: Iterable[Sample] = ()          # cores, the busiest task (1 min rate)
    memory: Iterable[Sample] = ()       # bytes, the largest working set
    cpu_p95: Iterable[Sample] = ()      # cores, p95 over the look-back, the busiest task
    memory_p95: Iterable[Sample] = ()   # bytes
    starts: Iterable[Sample] = ()       # container start time (seconds), per container seen in the look-back


def _by_service(samples: Iterable[Sample]) -> dict[str, float]:
    label = LABELS["service_name"]
    return {s.labels[label]: s.value for s in samples if s.labels.get(label) and math.isfinite(s.value)}


def restarts(starts: Iterable[Sample], now: float, lookback: float) -> dict[str, int]:
    """Restarts per service: containers started within the look-back in each task slot, less the slot's
    first one when the slot itself is new (no container of it started before the window)."""
    service_label, task_label = LABELS["service_name"], LABELS["task_name"]
    window_start = now - lookback
    recent: dict[tuple[str, str], int] = {}
    older: set[tuple[str, str]] = set()
    for sample in starts:
        service, task = sample.labels.get(service_label, ""), sample.labels.get(task_label, "")
        parts = task.rsplit(".", 2)
        if not service or len(parts) != 3 or not math.isfinite(sample.value):
            continue
        slot = (service, parts[1])
        if sample.value >= window_start:
            recent[slot] = recent.get(slot, 0) + 1
        else:
            older.add(slot)
    counts: dict[str, int] = {}
    for slot, started in recent.items():
        counts[slot[0]] = counts.get(slot[0], 0) + started - (0 if slot in older else 1)
    return counts


def service_findings(services: Iterable[Entry], usage: ServiceUsage, now: float, lookback: float
                     ) -> list[Finding]:
    by_name = {entry.name: entry for entry in services if entry.name}
    cpu, memory = _by_service(usage.cpu), _by_service(usage.memory)
    cpu_p95, memory_p95 = _by_service(usage.cpu_p95), _by_service(usage.memory_p95)
    restart_counts = restarts(usage.starts, now, lookback)
    found: list[Finding] = []
    for name in sorted(by_name):
        entry = by_name[name]
        resources = dig(entry.raw, "Spec", "TaskTemplate", "Resources") or {}
        limits, reservations = resources.get("Limits") or {}, resources.get("Reservations") or {}
        found += _limit_findings(entry, limits, cpu.get(name), memory.get(name))
        found += _over_provisioned(entry, reservations, cpu_p95.get(name), memory_p95.get(name))
        count = restart_counts.get(name, 0)
        if count > FLAKY_RESTARTS:
            found.append(Finding("flaky-service", "warning", "service", entry.id, entry.name,
                                 f"{count} container restarts in the last {round(lookback / 60)} min.",
                                 "Read the task logs; fix the crash, the healthcheck or the memory limit.",
                                 f"GET /services/{entry.id}/logs"))
    return found


Figures = dict[str, tuple[float, float, int]]   # resource → (current, configured, suggested) (units: see MetricFinding)


def _limit_findings(entry: Entry, limits: Mapping[str, Any], cpu: float | None, memory: float | None
                    ) -> list[Finding]:
    at: Figures = {}
    near: Figures = {}
    nano = limits.get("NanoCPUs")
    if isinstance(nano, int) and nano > 0 and cpu is not None:
        ratio = cpu * 1e9 / nano
        figures = (cpu_percent(cpu), cpu_percent(nano / 1e9), suggested_cpu(cpu))
        if ratio > AT_LIMIT:
            at["cpu"] = figures
        elif ratio > APPROACHING_LIMIT:
            near["cpu"] = figures
    limit = limits.get("MemoryBytes")
    if isinstance(limit, int) and limit > 0 and memory is not None:
        ratio = memory / limit
        figures = (int(memory), limit, suggested_memory(memory))
        if ratio > AT_LIMIT:
            at["memory"] = figures
        elif ratio > APPROACHING_LIMIT:
            near["memory"] = figures
    found: list[Finding] = []
    action = f"PATCH /services/{entry.id}/resources"
    if at:
        found.append(_sized(entry, "at-limit", "critical", at,
                            f"Usage above {AT_LIMIT:.0%} of the limit: the task is throttled or about to "
                            "be OOM-killed.", "Raise the limit to the suggested value.", action))
    if near:
        found.append(_sized(entry, "approaching-limit", "warning", near,
                            f"Usage above {APPROACHING_LIMIT:.0%} of the limit.",
                            "Raise the limit to the suggested value before it throttles.", action))
    return found


def _over_provisioned(entry: Entry, reservations: Mapping[str, Any], cpu: float | None, memory: float | None
                      ) -> list[Finding]:
    low: Figures = {}
    nano = reservations.get("NanoCPUs")
    if isinstance(nano, int) and nano > 0 and cpu is not None and cpu * 1e9 < OVER_PROVISIONED * nano:
        low["cpu"] = (cpu_percent(cpu), cpu_percent(nano / 1e9), suggested_cpu(cpu))
    reserved = reservations.get("MemoryBytes")
    if isinstance(reserved, int) and reserved > 0 and memory is not None and memory < OVER_PROVISIONED * reserved:
        low["memory"] = (int(memory), reserved, suggested_memory(memory))
    if not low:
        return []
    return [_sized(entry, "over-provisioned", "info", low,
                   f"p95 use below {OVER_PROVISIONED:.0%} of the reservation: capacity is held for nothing.",
                   "Lower the reservation to the suggested value.", f"PATCH /services/{entry.id}/resources")]


def _sized(entry: Entry, check: str, severity: str, figures: Figures, message: str, fix: str, action: str
           ) -> MetricFinding:
    names = [name for name in ("cpu", "memory") if name in figures]
    detail = "; ".join(f"{name} {_show(name, figures[name][0])} of {_show(name, figures[name][1])}"
                       for name in names)
    if len(names) == 1:
        current, configured, suggested = figures[names[0]]
        return MetricFinding(check, severity, "service", entry.id, entry.name, f"{message} ({detail})", fix,
                             action, names[0], current=current, configured=configured, suggested=suggested)
    return MetricFinding(check, severity, "service", entry.id, entry.name, f"{message} ({detail})", fix, action,
                         "cpu+memory", current={n: figures[n][0] for n in names},
                         configured={n: figures[n][1] for n in names},
                         suggested={n: figures[n][2] for n in names})


def _show(resource: str, value: float) -> str:
    return f"{value:g} %" if resource == "cpu" else f"{value / 1024 ** 2:.0f} MiB"


# ---------------------------------------------------------------------------------------------- queries
def _queries(lookback: float) -> dict[str, str]:
    service, task = LABELS["service_name"], LABELS["task_id"]
    window = f"{int(lookback)}s"
    per_task_cpu = f'sum by ({service}, {task}) (rate({CPU_METRIC}{{{service}!=""}}[1m]))'
    return {
        "uname": "node_uname_info",
        "fs_size": 'node_filesystem_size_bytes{mountpoint="/"}',
        "fs_avail": 'node_filesystem_avail_bytes{mountpoint="/"}',
        "mem_total": "node_memory_MemTotal_bytes",
        "mem_avail": "node_memory_MemAvailable_bytes",
        "cpu": f"max by ({service}) ({per_task_cpu})",
        "memory": f'max by ({service}) ({MEMORY_METRIC}{{{service}!=""}})',
        "cpu_p95": f"max by ({service}) (quantile_over_time(0.95, ({per_task_cpu})[{window}:1m]))",
        "memory_p95": f'max by ({service}) (quantile_over_time(0.95, {MEMORY_METRIC}{{{service}!=""}}[{window}]))',
        "starts": f'max_over_time({RESTARTS_HINT_METRIC}{{{service}!=""}}[{window}])',
    }


class PrometheusChecks:
    """The periodic greenlet: every ``interval`` s, query, evaluate, ``publish`` per group. Never raises."""

    def __init__(self, cache: Cache, client: PrometheusClient, publish: Publish, lookback: float,
                 clock: Callable[[], float], interval: float = INTERVAL, first_delay: float = FIRST_DELAY
                 ) -> None:
        self._cache = cache
        self._client = client
        self._publish = publish
        self._lookback = lookback
        self._clock = clock
        self.interval = interval
        self.first_delay = first_delay
        self.failures: dict[tuple[str, str], int] = {NODES: 0, SERVICES: 0}
        self.runs = 0
        self._greenlet: Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self._client.close()

    def _loop(self) -> None:
        gevent.sleep(self.first_delay)
        while True:
            self.run_once()
            gevent.sleep(self.interval)

    def run_once(self) -> None:
        """One run of both groups, each within ``RUN_TIMEOUT``; failures are logged and counted."""
        queries = _queries(self._lookback)
        self._group(NODES, lambda: node_findings(
            self._cache.entries(ResourceKind.NODE),
            *(self._client.vector(queries[key]) for key in ("uname", "fs_size", "fs_avail", "mem_total",
                                                            "mem_avail"))))
        self._group(SERVICES, lambda: service_findings(
            self._cache.entries(ResourceKind.SERVICE),
            ServiceUsage(*(self._client.vector(queries[key])
                           for key in ("cpu", "memory", "cpu_p95", "memory_p95", "starts"))),
            self._clock(), self._lookback))
        self.runs += 1

    def _group(self, subject: tuple[str, str], evaluate: Callable[[], list[Finding]]) -> None:
        try:
            with gevent.Timeout(RUN_TIMEOUT, UpstreamError("MTR002", "The Prometheus checks timed out.")):
                findings = evaluate()
        except UpstreamError as exc:
            self.failures[subject] += 1
            log.warning("prometheus checks failed", extra={"group": subject[1], "detail": exc.detail,
                                                          "failures": self.failures[subject]})
            if self.failures[subject] >= STALE_RUNS:
                self._publish(subject, [])
            return
        except Exception:   # a bug must not end the loop
            log.exception("prometheus checks failed", extra={"group": subject[1]})
            return
        self.failures[subject] = 0
        self._publish(subject, findings)
