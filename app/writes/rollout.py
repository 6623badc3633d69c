"""``Prefer: wait=N`` on service writes: hold the answer until the rollout settles, then say how it ended.

Why: a script that changes a service wants to know whether the change took, without a polling loop of its
own. Settled means: when the write changed the task template (image, env, resources, restart...), the
engine's rolling update that the write started (an ``UpdateStatus`` newer than the one before the write)
reached ``completed``, ``paused``, ``rollback_completed`` or ``rollback_paused``; when it did not (scale,
service labels), the running tasks equal the desired ones. The wait polls the engine every
:data:`POLL_SECONDS` from the request's own greenlet (I/O only), for at most N seconds.

A worker shutdown (SIGTERM: ``Runtime.drain``) sets the ``stop`` event: every wait ends at once and answers
with the state seen so far (``settled: false, state: "interrupted"``, the engine's ``updateState``), so the
client gets its answer (the write was applied) before gunicorn's graceful timeout instead of a reset.
"""

from __future__ import annotations

import time
from typing import Any

from gevent.event import Event

from app.engine.writes import EngineWriter, WriteFailure

POLL_SECONDS = 0.25
INTERRUPTED = "interrupted"
SETTLED_STATES = frozenset({"completed", "paused", "rollback_completed", "rollback_paused"})


def started_at(service: dict[str, Any] | None) -> str | None:
    status = (service or {}).get("UpdateStatus") or {}
    value = status.get("StartedAt")
    return str(value) if value else None


def changes_tasks(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether a spec change makes the engine replace tasks (a rolling update)."""
    return before.get("TaskTemplate") != after.get("TaskTemplate")


def wait_settled(writer: EngineWriter, service_id: str, seconds: float, *, expects_update: bool,
                 previous_start: str | None, stop: Event | None = None) -> dict[str, Any]:
    """The outcome after at most ``seconds``: ``{settled, state, waitedSeconds, runningTasks?,
    desiredTasks?, updateState?, message?}``; ``state`` is the update state, ``converged``, ``timeout``, or
    ``interrupted`` when ``stop`` was set (worker shutdown) before the rollout settled."""
    stop = stop or Event()
    began = time.monotonic()
    deadline = began + seconds
    last: dict[str, Any] | None = None
    while True:
        try:
            last = writer.service_status(service_id)
        except WriteFailure:
            last = None
        outcome = _judge(last, expects_update, previous_start)
        now = time.monotonic()
        if outcome is not None or now >= deadline or stop.is_set():
            result = _describe(last, outcome or (INTERRUPTED if stop.is_set() else "timeout"))
            result["settled"] = outcome is not None
            result["waitedSeconds"] = round(now - began, 3)
            return result
        stop.wait(min(POLL_SECONDS, max(0.0, deadline - now)))


def _judge(service: dict[str, Any] | None, expects_update: bool, previous_start: str | None) -> str | None:
    if service is None:
        return "removed"
    update = service.get("UpdateStatus") or {}
    state = str(update.get("State") or "")
    if expects_update:
        if started_at(service) in (None, previous_start):
            return None          # the engine has not started the update yet
        return state if state in SETTLED_STATES else None
    counts = service.get("ServiceStatus") or {}
    running, desired = counts.get("RunningTasks"), counts.get("DesiredTasks")
    if running is not None and running == desired:
        return "converged"
    return None


def _describe(service: dict[str, Any] | None, state: str) -> dict[str, Any]:
    result: dict[str, Any] = {"state": state}
    if service is None:
        return result
    counts = service.get("ServiceStatus") or {}
    if "RunningTasks" in counts:
        result["runningTasks"] = counts.get("RunningTasks")
        result["desiredTasks"] = counts.get("DesiredTasks")
    update_state = (service.get("UpdateStatus") or {}).get("State")
    if update_state and state == INTERRUPTED:
        result["updateState"] = update_state     # the engine's own word for the rollout so far ("updating")
    message = (service.get("UpdateStatus") or {}).get("Message")
    if message:
        result["message"] = message
    return result
