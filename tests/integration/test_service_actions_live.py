"""Service actions through the API against the lab engine, each checked with the engine's own inspect:
scale, image, restart, rollback, remove; ``Prefer: return=minimal`` and ``wait``; ``If-Match``; two
concurrent writers of the same version (through a real gunicorn); the audit slot of the history."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import requests

from tests.conftest import running_app, wait_for
from tests.integration.engine_state import settled_etag, sleeper

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def app3(docker_host: str) -> Iterator[Any]:
    yield from running_app(docker_host, operations_level=3)


@pytest.fixture
def service(dclient: docker.DockerClient, app3: Any) -> Iterator[Any]:
    created = sleeper(dclient, f"t-actions-{uuid.uuid4().hex[:8]}")
    client = app3.test_client()
    wait_for(lambda: client.get(f"/services/{created.id}").status_code == 200, 10, message="service cached")
    yield created
    with contextlib.suppress(docker.errors.NotFound):
        created.remove()


def replicas(engine: docker.APIClient, service_id: str) -> int:
    return int(engine.inspect_service(service_id)["Spec"]["Mode"]["Replicated"]["Replicas"])


def test_scale_answers_the_detail_read_back_from_the_engine(app3: Any, service: Any,
                                                          engine: docker.APIClient) -> None:
    client = app3.test_client()
    response = client.put(f"/services/{service.id}/scale", json={"replicas": 2})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["@type"] == "Service" and body["@id"] == f"/services/{service.id}"
    assert body["service"]["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
    assert replicas(engine, service.id) == 2
    assert body["service"]["Version"]["Index"] == engine.inspect_service(service.id)["Version"]["Index"]
    # read-your-writes: the cache already holds the engine's new state
    assert client.get(f"/services/{service.id}").get_json()["service"]["Spec"]["Mode"]["Replicated"]["Replicas"] == 2
    # the answer carries the detail's validator: still its current ETag, or (its tasks starting meanwhile change
    # the detail) one an If-Match write still accepts, because the service itself has not changed since
    etag = response.headers["ETag"]
    if etag != client.get(f"/services/{service.id}").headers["ETag"]:
        again = client.put(f"/services/{service.id}/scale", json={"replicas": 2}, headers={"If-Match": etag})
        assert again.status_code == 200, again.get_json()


def test_return_minimal_is_204_with_preference_applied(app3: Any, service: Any, engine: docker.APIClient) -> None:
    response = app3.test_client().put(f"/services/{service.id}/scale", json={"replicas": 3},
                                      headers={"Prefer": "return=minimal"})
    assert response.status_code == 204 and response.data == b""
    assert response.headers["Preference-Applied"] == "return=minimal"
    assert replicas(engine, service.id) == 3


def test_bad_bodies_are_problems_and_write_nothing(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = app3.test_client()
    version = engine.inspect_service(service.id)["Version"]["Index"]
    for body, code in (({}, "SVC004"), ({"replicas": -1}, "SVC004"), ({"replicas": "2"}, "SVC004")):
        response = client.put(f"/services/{service.id}/scale", json=body)
        assert response.status_code == 400 and response.get_json()["code"] == code
    response = client.put(f"/services/{service.id}/scale", data=b"{not json", content_type="application/json")
    assert response.status_code == 400 and response.get_json()["code"] == "API006"
    response = client.put(f"/services/{service.id}/image", json={"image": "  "})
    assert response.get_json()["code"] == "SVC006"
    response = client.put("/services/nope/scale", json={"replicas": 1})
    assert response.status_code == 404 and response.get_json()["code"] == "SVC003"
    assert engine.inspect_service(service.id)["Version"]["Index"] == version


def test_if_match_with_a_stale_etag_is_412_and_writes_nothing(app3: Any, service: Any,
                                                             engine: docker.APIClient) -> None:
    client = app3.test_client()
    etag = settled_etag(client, service.id)
    fresh = client.put(f"/services/{service.id}/scale", json={"replicas": 2}, headers={"If-Match": etag})
    assert fresh.status_code == 200
    stale = client.put(f"/services/{service.id}/scale", json={"replicas": 5}, headers={"If-Match": etag})
    assert stale.status_code == 412
    assert stale.get_json()["code"] == "SVC001" and stale.get_json()["status"] == 412
    assert replicas(engine, service.id) == 2
    assert client.put(f"/services/{service.id}/scale", json={"replicas": 1},
                      headers={"If-Match": settled_etag(client, service.id)}).status_code == 200
    assert replicas(engine, service.id) == 1


def test_restart_with_prefer_wait_reports_the_settled_rollout(app3: Any, service: Any,
                                                              engine: docker.APIClient) -> None:
    before = engine.inspect_service(service.id)["Spec"]["TaskTemplate"].get("ForceUpdate", 0)
    response = app3.test_client().post(f"/services/{service.id}/restart", headers={"Prefer": "wait=30"})
    assert response.status_code == 200, response.get_json()
    rollout = response.get_json()["rollout"]
    assert rollout["settled"] is True and rollout["state"] == "completed", rollout
    assert response.headers["Preference-Applied"] == "wait=30"
    inspected = engine.inspect_service(service.id)
    assert inspected["Spec"]["TaskTemplate"]["ForceUpdate"] == before + 1
    assert inspected["UpdateStatus"]["State"] == "completed"


def test_image_then_rollback(app3: Any, service: Any, engine: docker.APIClient, dclient: docker.DockerClient) -> None:
    tag = f"local/busybox:t-actions-{uuid.uuid4().hex[:6]}"
    dclient.images.get("local/busybox:latest").tag(*tag.split(":"))
    try:
        client = app3.test_client()
        response = client.put(f"/services/{service.id}/image", json={"image": tag}, headers={"Prefer": "wait=30"})
        assert response.status_code == 200
        assert engine.inspect_service(service.id)["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] == tag
        wait_for(lambda: client.get(f"/services/{service.id}").get_json()["service"].get("PreviousSpec"), 10,
                 message="previous spec cached")
        response = client.post(f"/services/{service.id}/rollback", headers={"Prefer": "wait=30"})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["rollout"]["state"] == "rollback_completed"
        image = engine.inspect_service(service.id)["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"]
        assert image.startswith("local/busybox:latest")
    finally:
        dclient.images.remove(tag)


def test_remove_service(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = app3.test_client()
    response = client.delete(f"/services/{service.id}")
    assert response.status_code == 204
    with pytest.raises(docker.errors.NotFound):
        engine.inspect_service(service.id)
    assert client.get(f"/services/{service.id}").status_code == 404


def test_a_stack_member_is_not_removed_without_force(app3: Any, engine: docker.APIClient) -> None:
    member = next(s for s in engine.services() if s["Spec"]["Name"] == "demo_web")
    response = app3.test_client().delete(f"/services/{member['ID']}")
    assert response.status_code == 409 and response.get_json()["code"] == "SVC002"
    assert engine.inspect_service(member["ID"])


def test_writes_through_the_service_are_audited_in_history(app3: Any, service: Any) -> None:
    client = app3.test_client()
    response = client.put(f"/services/{service.id}/scale", json={"replicas": 2}, headers={"Request-Id": "audit-me-1"})
    assert response.status_code == 200

    def audited() -> Any:
        items = client.get(f"/history?type=service&resourceId={service.id}").get_json()["items"]
        return [item for item in items if item.get("audit")]

    entries = wait_for(audited, 10, message="an audited history entry")
    assert entries[0]["audit"] == {"identity": "anonymous", "requestId": "audit-me-1"}  # type: ignore[index]


def test_two_writers_of_the_same_version_one_gets_409(server: str, dclient: docker.DockerClient,
                                                      engine: docker.APIClient) -> None:
    """Through gunicorn (operations level 1 allows scale): both requests leave together, so both are
    checked against the version they read; the engine takes one and refuses the other."""
    created = sleeper(dclient, f"t-race-{uuid.uuid4().hex[:8]}")
    try:
        wait_for(lambda: requests.get(f"{server}/services/{created.id}", timeout=5).status_code == 200, 10,
                 message="service cached")
        outcomes: list[int] = []
        for attempt in range(5):
            barrier = threading.Barrier(2)
            results: dict[int, requests.Response] = {}

            def write(replicas: int, barrier: threading.Barrier = barrier,
                      results: dict[int, requests.Response] = results) -> None:
                with requests.Session() as session:
                    session.get(f"{server}/-/health", timeout=5)   # connection ready before the barrier
                    barrier.wait(5)
                    results[replicas] = session.put(f"{server}/services/{created.id}/scale",
                                                    json={"replicas": replicas}, timeout=30)

            threads = [threading.Thread(target=write, args=(n,)) for n in (2 + 2 * attempt, 3 + 2 * attempt)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            statuses = sorted(r.status_code for r in results.values())
            outcomes.append(statuses.count(409))
            if statuses == [200, 409]:
                winner = next(n for n, r in results.items() if r.status_code == 200)
                loser = next(r for r in results.values() if r.status_code == 409)
                assert loser.json()["code"] == "SVC001"
                assert replicas(engine, created.id) == winner
                return
            assert statuses == [200, 200], statuses   # they did not overlap: both applied in turn
        pytest.fail(f"the two writers never overlapped in 5 attempts: {outcomes}")
    finally:
        created.remove()
