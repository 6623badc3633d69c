"""``Prefer: wait`` and a worker shutdown: the stop event ends a wait at once with the rollout so far."""

from __future__ import annotations

import time
from typing import Any

import gevent
from gevent.event import Event

from app.writes.rollout import wait_settled

UPDATING = {"UpdateStatus": {"State": "updating", "StartedAt": "2026-01-02T00:00:00Z"},
            "ServiceStatus": {"RunningTasks": 1, "DesiredTasks": 2}}


class SlowRollout:
    """A writer whose service stays in the middle of its update."""

    def __init__(self) -> None:
        self.polls = 0

    def service_status(self, service_id: str) -> dict[str, Any]:
        self.polls += 1
        return UPDATING


def test_the_stop_event_ends_a_wait_with_the_rollout_so_far() -> None:
    stop = Event()
    writer = SlowRollout()
    waiting = gevent.spawn(wait_settled, writer, "s1", 60.0, expects_update=True,  # type: ignore[arg-type]
                           previous_start=None, stop=stop)
    gevent.sleep(0.6)   # not a wait: the time spent waiting is what ``waitedSeconds`` must report below
    assert not waiting.ready() and writer.polls >= 2
    stopped = time.monotonic()
    stop.set()
    result = waiting.get(timeout=1)
    assert time.monotonic() - stopped < 0.1
    assert result["settled"] is False and result["state"] == "interrupted"
    assert result["updateState"] == "updating"
    assert result["runningTasks"] == 1 and result["desiredTasks"] == 2
    assert 0.5 < result["waitedSeconds"] < 1.0


def test_a_stop_already_set_still_reports_what_the_engine_says() -> None:
    stop = Event()
    stop.set()
    writer = SlowRollout()
    result = wait_settled(writer, "s1", 60.0, expects_update=True, previous_start=None,  # type: ignore[arg-type]
                          stop=stop)
    assert writer.polls == 1 and result["state"] == "interrupted" and result["updateState"] == "updating"


def test_without_a_stop_a_wait_runs_to_its_timeout() -> None:
    result = wait_settled(SlowRollout(), "s1", 0.3, expects_update=True,  # type: ignore[arg-type]
                          previous_start=None)
    assert result["state"] == "timeout" and "updateState" not in result and result["waitedSeconds"] >= 0.3
