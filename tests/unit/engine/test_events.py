"""interpret(): which object an engine event refreshes and whether the task list must be reconciled."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.events import NOTHING, Refresh, interpret
from app.resources import ResourceKind

K = ResourceKind
TASK_LABELS = {"com.docker.swarm.task.id": "task123", "com.docker.swarm.service.id": "svc1",
               "com.docker.swarm.node.id": "node1"}


def event(event_type: str, action: str, actor_id: str = "abc", **attributes: str) -> dict[str, Any]:
    return {"Type": event_type, "Action": action, "Actor": {"ID": actor_id, "Attributes": attributes},
            "scope": "swarm", "time": 1_700_000_000, "timeNano": 1_700_000_000_000_000_000}


@pytest.mark.parametrize(("event_type", "kind"), [
    ("service", K.SERVICE), ("node", K.NODE),
])
@pytest.mark.parametrize("action", ["create", "update", "remove"])
def test_service_and_node_events_refresh_the_object_and_the_tasks(event_type: str, kind: ResourceKind,
                                                                    action: str) -> None:
    assert interpret(event(event_type, action, "obj1")) == Refresh((kind, "obj1"), True)


@pytest.mark.parametrize(("event_type", "kind"), [
    ("config", K.CONFIG), ("secret", K.SECRET), ("network", K.NETWORK), ("volume", K.VOLUME),
])
@pytest.mark.parametrize("action", ["create", "update", "remove", "destroy"])
def test_other_object_events_refresh_only_the_object(event_type: str, kind: ResourceKind,
                                                     action: str) -> None:
    assert interpret(event(event_type, action, "obj1")) == Refresh((kind, "obj1"), False)


def test_volume_events_refresh_the_volume_by_name() -> None:
    assert interpret(event("volume", "mount", "shop_data", container="c1")) == Refresh(
        (K.VOLUME, "shop_data"), False)


@pytest.mark.parametrize("action", ["create", "start", "die", "kill", "stop", "destroy", "oom", "restart"])
def test_container_events_with_a_task_label_refresh_that_task(action: str) -> None:
    message = event("container", action, "c" * 64, **TASK_LABELS)
    assert interpret(message) == Refresh((K.TASK, "task123"), True)


@pytest.mark.parametrize("action", [
    "exec_create: /bin/sh -c healthcheck", "exec_start: /bin/sh -c healthcheck", "exec_die",
    "health_status: healthy", "health_status: unhealthy", "top", "attach", "resize", "archive-path",
    "export", "commit",
])
def test_noisy_container_events_are_ignored(action: str) -> None:
    assert interpret(event("container", action, "c" * 64, **TASK_LABELS)) == NOTHING


def test_container_events_without_a_task_label_refresh_nothing() -> None:
    assert interpret(event("container", "start", "c" * 64, image="nginx")) == NOTHING


@pytest.mark.parametrize("event_type", ["image", "plugin", "daemon", "builder", ""])
def test_events_of_other_types_are_ignored(event_type: str) -> None:
    assert interpret(event(event_type, "pull", "x")) == NOTHING


@pytest.mark.parametrize("message", [
    {"Type": "service", "Action": "update", "Actor": {"ID": ""}},
    {"Type": "service", "Action": "update", "Actor": {}},
    {"Type": "service", "Action": "update"},
    {},
])
def test_events_without_an_actor_id_are_ignored(message: dict[str, Any]) -> None:
    assert interpret(message) == NOTHING


def test_container_event_with_null_attributes_is_ignored() -> None:
    message = {"Type": "container", "Action": "start", "Actor": {"ID": "c", "Attributes": None}}
    assert interpret(message) == NOTHING
