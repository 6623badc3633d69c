"""The checks: pure functions from cache entries (plus a small context) to findings.

Each function looks at one object (a service, a node, an unused-object candidate) or at the cluster, so the
engine can re-run exactly the checks a change can affect (``app.recommendations.engine``). The costs are
one object plus, for services and nodes, their own tasks.

| check id                  | severity          | fires when                                                   |
|---------------------------|-------------------|--------------------------------------------------------------|
| no-limits                 | warning           | a service lacks a CPU and/or memory limit                    |
| no-reservations           | info              | a limit is set but the matching reservation is not           |
| single-replica            | info              | a replicated service runs one replica                        |
| no-healthcheck            | warning           | no healthcheck in the service spec, or test ["NONE"]         |
| no-restart-policy         | warning           | restart condition none                                       |
| image-latest              | warning           | the image has no tag, or :latest                             |
| restart-loop              | critical          | >= 3 tasks failed within the look-back (10 min)              |
| replicas-not-running      | warning/critical  | fewer tasks run than desired (critical: none) after a grace  |
| constraint-label-missing  | critical/info     | a placement constraint names a node label no node has        |
| node-unavailable-pinned   | critical/warning  | a down/drained node still has pinned services / tasks        |
| manager-has-workloads     | warning           | an active manager runs tasks                                 |
| manager-quorum            | warning           | one manager, or an even number of managers                   |
| unused-config/-secret/-network/-volume | info | no service uses the object                                |
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.cache.entries import Entry, dig, image_reference
from app.cache.store import Cache
from app.recommendations.constraints import Placement
from app.recommendations.findings import CLUSTER_ID, Finding
from app.resources import ResourceKind

UNUSED_CHECKS = {ResourceKind.CONFIG: "unused-config", ResourceKind.SECRET: "unused-secret",
                 ResourceKind.NETWORK: "unused-network", ResourceKind.VOLUME: "unused-volume"}
CHECK_IDS = ("no-limits", "no-reservations", "single-replica", "no-healthcheck", "no-restart-policy",
             "image-latest", "restart-loop", "replicas-not-running", "constraint-label-missing",
             "node-unavailable-pinned", "manager-has-workloads", "manager-quorum", *UNUSED_CHECKS.values())


@dataclass(frozen=True, slots=True)
class Context:
    """What the checks of one object need beyond the object and its tasks."""

    now: float
    node_labels: frozenset[str] = frozenset()      # label keys some node has
    engine_labels: frozenset[str] = frozenset()
    pinned: Mapping[str, Set[str]] = field(default_factory=dict)   # hostname or node id → service ids
    lookback: float = 600.0                          # restart-loop window, seconds
    failures: int = 3                                # restart-loop threshold
    grace: float = 30.0                              # replicas-not-running: seconds after a spec change


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None



def replicas(entry: Entry) -> int | None:
    """Desired replicas of a replicated service; None for global services and jobs."""
    value = dig(entry.raw, "Spec", "Mode", "Replicated", "Replicas")
    if dig(entry.raw, "Spec", "Mode", "Replicated") is None:
        return None
    return value if isinstance(value, int) else 1


# ---------------------------------------------------------------------------------------------- services
def service_findings(cache: Cache, entry: Entry, placement: Placement, context: Context) -> list[Finding]:
    found = [*_resources(entry), *_image(entry), *_healthcheck(entry), *_restart_policy(entry),
             *_labels_missing(entry, placement, context)]
    desired = replicas(entry)
    if desired == 1:
        found.append(_service(entry, "single-replica", "info",
                              "One replica: any restart, node failure or update interrupts the service.",
                              "Run at least 2 replicas (and a start-first update order).",
                              f"PUT /services/{entry.id}/scale"))
    found += _task_health(cache, entry, desired, context)
    return found


def _service(entry: Entry, check: str, severity: str, message: str, fix: str, action: str | None = None,
             resource: str | None = None) -> Finding:
    return Finding(check, severity, "service", entry.id, entry.name, message, fix, action, resource)


def _resources(entry: Entry) -> list[Finding]:
    resources = dig(entry.raw, "Spec", "TaskTemplate", "Resources") or {}
    limits, reservations = resources.get("Limits") or {}, resources.get("Reservations") or {}
    action = f"PATCH /services/{entry.id}/resources"
    found: list[Finding] = []
    missing = [name for name, key in (("cpu", "NanoCPUs"), ("memory", "MemoryBytes")) if not limits.get(key)]
    if missing:
        what = "+".join(missing)
        found.append(_service(entry, "no-limits", "warning",
                              f"No {' or '.join(missing)} limit: one task can starve everything on its node.",
                              f"Set a {' and a '.join(missing)} limit sized from observed use.", action, what))
    unreserved = [name for name, key in (("cpu", "NanoCPUs"), ("memory", "MemoryBytes"))
                  if limits.get(key) and not reservations.get(key)]
    if unreserved:
        found.append(_service(entry, "no-reservations", "info",
                              f"A {' and '.join(unreserved)} limit but no matching reservation: the scheduler "
                              "may place tasks on nodes that cannot hold them.",
                              f"Reserve the {' and '.join(unreserved)} a task needs to start.", action,
                              "+".join(unreserved)))
    return found


def _image(entry: Entry) -> list[Finding]:
    image = image_reference(str(entry.activation["image"]))
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:       # no tag at all (a ':' belongs to a registry port)
        tag = ""
    if tag and tag != "latest":
        return []
    said = "no tag (latest)" if not tag else ":latest"
    return [_service(entry, "image-latest", "warning",
                     f"Image {image} uses {said}: what runs changes with the next pull and rollbacks "
                     "cannot return to a known version.",
                     "Pin a version tag (or a digest).", f"PATCH /services/{entry.id}")]


def _healthcheck(entry: Entry) -> list[Finding]:
    test = dig(entry.raw, "Spec", "TaskTemplate", "ContainerSpec", "Healthcheck", "Test")
    if test and test != ["NONE"]:
        return []
    return [_service(entry, "no-healthcheck", "warning",
                     "No healthcheck in the service spec: a task counts as running while it does not "
                     "answer, and updates cannot wait for health (an image HEALTHCHECK is not visible here).",
                     "Add a healthcheck (test, interval, timeout, retries, start period).")]


def _restart_policy(entry: Entry) -> list[Finding]:
    if dig(entry.raw, "Spec", "TaskTemplate", "RestartPolicy", "Condition") != "none":
        return []
    return [_service(entry, "no-restart-policy", "warning",
                     "Restart condition none: a task that exits is never replaced.",
                     "Use restart condition on-failure or any.")]


def _labels_missing(entry: Entry, placement: Placement, context: Context) -> list[Finding]:
    absent = [ref for ref in placement.labels
              if ref.key not in (context.node_labels if ref.source == "node" else context.engine_labels)]
    if not absent:
        return []
    blocking = [ref for ref in absent if ref.equal]
    texts = ", ".join(ref.text for ref in absent)
    if blocking:
        return [_service(entry, "constraint-label-missing", "critical",
                         f"No node has the label of constraint {texts}: its tasks cannot be scheduled.",
                         "Add the label to the intended nodes, or fix the constraint.",
                         f"PATCH /services/{entry.id}")]
    return [_service(entry, "constraint-label-missing", "info",
                     f"No node has the label of constraint {texts}: the constraint excludes nothing.",
                     "Remove the constraint, or label the nodes it should exclude.")]


def _task_health(cache: Cache, entry: Entry, desired: int | None, context: Context) -> list[Finding]:
    found: list[Finding] = []
    window_start = context.now - context.lookback
    failed, last_error = 0, ""
    for task in cache.failed_tasks(entry.id):   # indexed: a 10,000-task service costs its failures only
        when = parse_time(dig(task.raw, "Status", "Timestamp")) or parse_time(task.updated)
        if when is not None and when >= window_start:
            failed += 1
            last_error = str(task.activation["error"]) or last_error
    if failed >= context.failures:
        minutes = round(context.lookback / 60)
        found.append(_service(entry, "restart-loop", "critical",
                              f"{failed} tasks failed in the last {minutes} min"
                              + (f" (latest: {last_error})" if last_error else "") + ": a restart loop.",
                              "Read the task logs and errors; fix the command, configuration or image.",
                              f"GET /services/{entry.id}/logs"))
    if desired:
        running = cache.running_tasks(entry.id)
        changed = parse_time(entry.updated) or 0.0
        if running < desired and context.now - changed >= context.grace:
            found.append(_service(entry, "replicas-not-running", "critical" if running == 0 else "warning",
                                  f"{running} of {desired} desired replicas running.",
                                  "Look at the pending or failed tasks: constraints, resources, image, errors.",
                                  f"GET /services/{entry.id}/tasks"))
    return found


def grace_left(entry: Entry, context: Context) -> float | None:
    """Seconds until ``replicas-not-running`` may judge a service changed moments ago (None: not waiting)."""
    changed = parse_time(entry.updated)
    if changed is None or not replicas(entry):
        return None
    left = context.grace - (context.now - changed)
    return left if left > 0 else None


# ---------------------------------------------------------------------------------------------- nodes
def node_findings(cache: Cache, entry: Entry, context: Context) -> list[Finding]:
    state, availability = entry.activation["state"], entry.activation["availability"]
    role = entry.activation["role"]
    desired_running = [task for task in cache.tasks_of_node(entry.id)
                       if task.activation["desired_state"] == "running"]
    found: list[Finding] = []
    if state != "ready" or availability != "active":
        pinned = sorted(set(context.pinned.get(entry.id, frozenset()))
                        | set(context.pinned.get(entry.name, frozenset())))
        pinned_names = [s.name for s in (cache.get(ResourceKind.SERVICE, i) for i in pinned) if s is not None]
        if pinned_names or desired_running:
            why = f"{state}" if state != "ready" else f"availability {availability}"
            parts = []
            if pinned_names:
                parts.append("services pinned to it by constraints: " + ", ".join(pinned_names))
            if desired_running:
                parts.append(f"{len(desired_running)} tasks still desired running on it")
            found.append(Finding("node-unavailable-pinned", "critical" if pinned_names else "warning", "node",
                                 entry.id, entry.name, f"Node is {why} while " + "; ".join(parts) + ".",
                                 "Bring the node back (availability active) or move the constraints to "
                                 "other nodes.", f"PUT /nodes/{entry.id}/availability",
                                 mentions=tuple(pinned)))
    if role == "manager" and availability == "active" and desired_running:
        found.append(Finding("manager-has-workloads", "warning", "node", entry.id, entry.name,
                             # No task count in the message: it would change (an SSE update) with every task.
                             "Manager runs workloads: a busy manager slows the raft consensus the whole "
                             "cluster depends on.",
                             "Drain the manager (availability drain) where workers can take the tasks.",
                             f"PUT /nodes/{entry.id}/availability"))
    return found


def cluster_findings(cache: Cache) -> list[Finding]:
    managers = sum(1 for node in cache.entries(ResourceKind.NODE) if node.activation["role"] == "manager")
    if managers == 1:
        return [Finding("manager-quorum", "warning", "cluster", CLUSTER_ID, "cluster",
                        "One manager: losing it stops all orchestration (no fault tolerance).",
                        "Run 3 (or 5) managers on separate machines.")]
    if managers and managers % 2 == 0:
        return [Finding("manager-quorum", "warning", "cluster", CLUSTER_ID, "cluster",
                        f"{managers} managers: an even count tolerates no more failures than {managers - 1} "
                        "and splits more easily.", f"Run {managers + 1} or {managers - 1} managers.")]
    return []


# ---------------------------------------------------------------------------------------------- unused
def unused_findings(cache: Cache, entry: Entry) -> list[Finding]:
    kind = entry.kind
    if kind is ResourceKind.NETWORK and (entry.activation["scope"] != "swarm" or entry.raw.get("Ingress")):
        return []   # local networks (bridge, host, none, gateways) and the ingress belong to the engine
    if cache.services_using(kind, entry.id):
        return []
    return [Finding(UNUSED_CHECKS[kind], "info", kind.value, entry.id, entry.name,
                    f"{kind.value.capitalize()} {entry.name} is used by no service.",
                    f"Remove it if nothing else needs it (DELETE {kind.spec.path}/{entry.id}).")]
