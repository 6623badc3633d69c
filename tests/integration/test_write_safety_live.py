"""Writes that cannot hurt the cluster or lie about what happened, through real gunicorn on the lab swarm:
a replicas ceiling (a low one: never more than a few tasks are made), Idempotency-Key retries applied once
(also across a kill -9 of the worker), and a write the engine takes but does not answer (dockerd stopped
with SIGSTOP) told as 504, applied later, and audited in /history when the watcher sees it."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import sleeper

CEILING = 3


@pytest.fixture(scope="module")
def safe_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """gunicorn with a state store (keys must outlive the worker), low bounds (3 replicas, 4 labels, 5 patch
    operations), a 2 s write timeout, and level 2 (label writes)."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("safe") / "gunicorn.log"
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("safe-state")),
                       SERVICE_WRITES_MAX_REPLICAS=str(CEILING), SERVICE_WRITES_TIMEOUT="2s",
                       SERVICE_WRITES_MAX_LABELS="4", SERVICE_WRITES_MAX_PATCH_OPERATIONS="5",
                       SERVICE_OPERATIONS_LEVEL="2")
    proc = launch_gunicorn(env, log_path, base)
    yield base, proc
    stop_gunicorn(proc, log_path)


@pytest.fixture
def service(safe_server: tuple[str, Any], dclient: docker.DockerClient) -> Iterator[Any]:
    base, _ = safe_server
    created = sleeper(dclient, f"t-safe-{uuid.uuid4().hex[:8]}", replicas=0)
    wait_for(lambda: requests.get(f"{base}/services/{created.id}", timeout=5).status_code == 200, 15,
             message="service cached")
    yield created
    created.remove()


def spec_of(engine: docker.APIClient, service_id: str) -> dict[str, Any]:
    inspected: dict[str, Any] = engine.inspect_service(service_id)
    return inspected


def key() -> dict[str, str]:
    return {"Idempotency-Key": f'"{uuid.uuid4()}"'}


def dockerd_pid() -> int:
    lab_dir, name = os.environ.get("SHOAL_LAB_DIR"), os.environ.get("SHOAL_LAB_NAME")
    if not lab_dir or not name:
        pytest.fail("SHOAL_LAB_DIR/SHOAL_LAB_NAME unset: run through scripts/lab-pytest", pytrace=False)
    return int((Path(lab_dir) / name / "n1" / "dockerd.pid").read_text().strip())


def worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


# ---------------------------------------------------------------------------------------------- bounds
def test_replicas_at_the_ceiling_pass_and_one_past_is_refused_naming_the_bound(
        safe_server: tuple[str, Any], service: Any, engine: docker.APIClient) -> None:
    base, _ = safe_server
    at = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": CEILING}, timeout=30)
    assert at.status_code == 200, at.text
    version = spec_of(engine, service.id)["Version"]["Index"]
    past = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": CEILING + 1}, timeout=30)
    assert past.status_code == 400 and past.headers["Content-Type"] == "application/problem+json"
    problem = past.json()
    assert problem["code"] == "API018"
    assert (problem["field"], problem["limit"], problem["requested"], problem["setting"]) == \
        ("replicas", CEILING, CEILING + 1, "writes.max_replicas")
    after = spec_of(engine, service.id)
    assert after["Spec"]["Mode"]["Replicated"]["Replicas"] == CEILING and after["Version"]["Index"] == version
    down = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": 0}, timeout=30)
    assert down.status_code == 200


def test_label_count_and_patch_size_bounds(safe_server: tuple[str, Any], service: Any,
                                           engine: docker.APIClient) -> None:
    base, _ = safe_server
    url = f"{base}/services/{service.id}/labels"
    current = requests.get(url, timeout=10).json()["labels"]   # the sleeper's own test label
    four = {**current, **{f"k{i}": "v" for i in range(4 - len(current))}}
    assert requests.put(url, json=four, timeout=30).status_code == 200
    five = {**four, "one-more": "v"}
    past = requests.put(url, json=five, timeout=30)
    assert past.status_code == 400 and (past.json()["code"], past.json()["field"], past.json()["limit"],
                                        past.json()["requested"]) == ("API018", "labels", 4, 5)
    assert spec_of(engine, service.id)["Spec"]["Labels"] == four
    patch = [{"op": "add", "path": f"/p{i}", "value": "v"} for i in range(6)]
    too_long = requests.patch(url, json=patch, headers={"Content-Type": "application/json-patch+json"}, timeout=30)
    assert too_long.status_code == 400 and too_long.json()["field"] == "patch"
    assert too_long.json()["limit"] == 5 and too_long.json()["requested"] == 6
    assert spec_of(engine, service.id)["Spec"]["Labels"] == four


# ---------------------------------------------------------------------------------------------- Idempotency-Key
def test_a_retried_scale_with_the_same_key_is_applied_once(safe_server: tuple[str, Any], service: Any,
                                                           engine: docker.APIClient) -> None:
    base, _ = safe_server
    headers = key()
    first = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": 1}, headers=headers, timeout=30)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    version = spec_of(engine, service.id)["Version"]["Index"]
    second = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": 1}, headers=headers, timeout=30)
    assert second.status_code == 200 and second.headers["Idempotent-Replayed"] == "true"
    assert second.content == first.content and second.headers["ETag"] == first.headers["ETag"]
    assert spec_of(engine, service.id)["Version"]["Index"] == version   # no second update reached the engine
    other = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": 2}, headers=headers, timeout=30)
    assert other.status_code == 422 and other.json()["code"] == "API020"
    assert spec_of(engine, service.id)["Spec"]["Mode"]["Replicated"]["Replicas"] == 1
    bad = requests.put(f"{base}/services/{service.id}/scale", json={"replicas": 1},
                       headers={"Idempotency-Key": "x" * 256}, timeout=30)
    assert bad.status_code == 400 and bad.json()["code"] == "API019"


def test_the_same_key_while_the_first_is_running_is_409(safe_server: tuple[str, Any], dclient: docker.DockerClient,
                                                        engine: docker.APIClient) -> None:
    """The first request holds its answer (Prefer: wait=3 on a scale that can never converge: no node has
    the label) while the second arrives with the same key."""
    base, _ = safe_server
    created = sleeper(dclient, f"t-safe-{uuid.uuid4().hex[:8]}", replicas=0,
                      constraints=["node.labels.shoal-test-nowhere==1"])
    try:
        wait_for(lambda: requests.get(f"{base}/services/{created.id}", timeout=5).status_code == 200, 15,
                 message="service cached")
        headers = {**key(), "Prefer": "wait=3"}
        results: dict[str, requests.Response] = {}

        def first() -> None:
            results["first"] = requests.put(f"{base}/services/{created.id}/scale", json={"replicas": 1},
                                            headers=headers, timeout=30)

        thread = threading.Thread(target=first)
        thread.start()
        # The scale reached the engine: the first request holds its answer (Prefer: wait=3) from here on.
        wait_for(lambda: dclient.api.inspect_service(created.id)["Spec"]["Mode"]["Replicated"]["Replicas"] == 1,
                 10, interval=0.02, message="the first scale applied")
        busy = requests.put(f"{base}/services/{created.id}/scale", json={"replicas": 1}, headers=headers, timeout=30)
        thread.join(30)
        assert busy.status_code == 409 and busy.json()["code"] == "API021" and busy.headers["Retry-After"] == "1"
        assert results["first"].status_code == 200
        assert results["first"].json()["rollout"]["settled"] is False
        replayed = requests.put(f"{base}/services/{created.id}/scale", json={"replicas": 1}, headers=headers,
                                timeout=30)
        assert replayed.headers["Idempotent-Replayed"] == "true" and replayed.content == results["first"].content
    finally:
        created.remove()


def test_an_answer_survives_a_kill_9_of_the_worker_and_is_replayed(safe_server: tuple[str, Any], service: Any,
                                                                   engine: docker.APIClient) -> None:
    """restart is not idempotent by nature (ForceUpdate counts up): the replay must not restart again."""
    base, master = safe_server
    headers = key()
    force = spec_of(engine, service.id)["Spec"]["TaskTemplate"].get("ForceUpdate", 0)
    first = requests.post(f"{base}/services/{service.id}/restart", headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert spec_of(engine, service.id)["Spec"]["TaskTemplate"]["ForceUpdate"] == force + 1
    old = worker_pid(master.pid)
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: worker_pid(master.pid) != old, 15, message="a new worker")
    wait_for(lambda: requests.get(f"{base}/-/ready", timeout=2).status_code == 200, 30, interval=0.2,
             message="the new worker ready")
    again = requests.post(f"{base}/services/{service.id}/restart", headers=headers, timeout=30)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert spec_of(engine, service.id)["Spec"]["TaskTemplate"]["ForceUpdate"] == force + 1


# ---------------------------------------------------------------------------------------------- unknown outcome
def test_a_write_the_engine_takes_but_does_not_answer_is_504_then_applied_once_and_audited(
        safe_server: tuple[str, Any], service: Any, engine: docker.APIClient) -> None:
    base, _ = safe_server
    headers = key()
    force = spec_of(engine, service.id)["Spec"]["TaskTemplate"].get("ForceUpdate", 0)
    pid = dockerd_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        unknown = requests.post(f"{base}/services/{service.id}/restart", headers=headers, timeout=30)
        waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert unknown.status_code == 504, unknown.text
    problem = unknown.json()
    assert problem["code"] == "ENG005" and problem["outcome"] == "unknown"
    assert f"/services/{service.id}" in problem["check"]
    assert "may have been applied" in problem["detail"]
    assert waited < 10, waited   # the 2 s write timeout, not the client's
    # the stopped engine read the request when it ran again, and applied it
    wait_for(lambda: spec_of(engine, service.id)["Spec"]["TaskTemplate"].get("ForceUpdate", 0) == force + 1, 30,
             message="the restart applied by the engine after SIGCONT")

    def audited() -> list[dict[str, Any]]:
        items = requests.get(f"{base}/history", params={"type": "service", "resourceId": service.id},
                             timeout=5).json()["items"]
        return [item for item in items if (item.get("audit") or {}).get("requestId") == problem["requestId"]]

    entries = wait_for(audited, 30, interval=0.2, message="the history entry with the 504's audit")
    assert entries[0]["audit"]["identity"] == "anonymous"  # type: ignore[index]
    retry = requests.post(f"{base}/services/{service.id}/restart", headers=headers, timeout=30)
    assert retry.status_code == 409 and problem["requestId"] in retry.json()["detail"], retry.text
    time.sleep(1.0)   # not a wait: a window in which a second restart may not show up
    assert spec_of(engine, service.id)["Spec"]["TaskTemplate"]["ForceUpdate"] == force + 1   # applied once
