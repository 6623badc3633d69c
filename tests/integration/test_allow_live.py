"""A detail's ``Allow`` (docs/writes.md) and ``If-Range`` (docs/read-api.md) against real gunicorn (gevent
worker) on the lab engine.

- The peer UI's flow: read a service detail's ``Allow`` (and ``Accept-Patch``), show the scale, image and
  env controls it allows, use them: at levels 1, 2 and 3 each control the detail offers works on the engine,
  and each it does not offer is refused (403) with nothing changed; a reader restricted by the ACL gets
  ``GET, HEAD`` and is refused the same writes. OPTIONS on the detail says what GET says.
- ``/stacks/summary`` is reserved: DELETE (and PUT/PATCH/POST) is 405 with ``Allow: GET, HEAD, OPTIONS`` and a
  real stack named "summary" on the engine stays.
- ``If-Range`` with the ETag of the whole list makes the Range apply (206).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import IMAGE, sleeper

pytestmark = pytest.mark.integration

MERGE = "application/merge-patch+json"
SUFFIX = uuid.uuid4().hex[:6]
NAME = f"t-allow-{SUFFIX}"
POLICY = {"grants": [
    {"resources": [f"service:{NAME}"], "audience": ["user:writer"], "permissions": ["read", "write"]},
    {"resources": [f"service:{NAME}"], "audience": ["user:reader"], "permissions": ["read"]},
    {"resources": ["*"], "audience": ["user:admin"], "permissions": ["read", "write"]},
]}
WRITER, READER, ADMIN = {"X-User": "writer"}, {"X-User": "reader"}, {"X-User": "admin"}
# The detail's Allow per level (docs/writes.md): service PUT, POST ≥1, PATCH ≥2, DELETE 3
DETAIL_ALLOW = {1: "GET, HEAD, POST, PUT", 2: "GET, HEAD, POST, PUT, PATCH", 3: "GET, HEAD, POST, PUT, PATCH, DELETE"}


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="module")
def service(dclient: docker.DockerClient) -> Iterator[Any]:
    created = sleeper(dclient, NAME)
    tag = f"local/busybox:t-allow-{SUFFIX}"
    dclient.images.get(IMAGE).tag(*tag.split(":"))
    created.tag = tag
    yield created
    created.remove()
    wait_for(lambda: not dclient.api.containers(all=True, filters={"label": f"com.docker.swarm.service.id="
                                                                           f"{created.id}"}), 30,
             message="service containers gone")
    dclient.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def servers(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, str]]:
    """One gunicorn per operations level 1..3, headers auth behind a trusted 127.0.0.1 proxy, the ACL above."""
    started: dict[int, tuple[str, Any, Path]] = {}
    try:
        for level in (1, 2, 3):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            log_path = tmp_path_factory.mktemp(f"gunicorn-allow-{level}") / "server.log"
            env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp(f"state-{level}")),
                               SERVICE_AUTH_MODE="headers", SERVICE_TRUSTED_PROXIES="127.0.0.1/32",
                               SERVICE_AUTH_HEADERS_SUBJECT="X-User", SERVICE_ACL_POLICY=json.dumps(POLICY),
                               SERVICE_OPERATIONS_LEVEL=str(level))
            started[level] = (base, launch_gunicorn(env, log_path, base), log_path)
        yield {level: base for level, (base, _, _) in started.items()}
    finally:
        for _, proc, log_path in started.values():
            stop_gunicorn(proc, log_path)


def spec_of(dclient: docker.DockerClient, service_id: str) -> dict[str, Any]:
    return dclient.api.inspect_service(service_id)


def cached(base: str, service_id: str, dclient: docker.DockerClient) -> None:
    """Wait until ``base``'s cache holds the engine's current version of the service (writes go with it)."""
    want = spec_of(dclient, service_id)["Version"]["Index"]
    wait_for(lambda: requests.get(f"{base}/services/{service_id}", headers=ADMIN, timeout=10)
             .json()["service"]["Version"]["Index"] == want, 20, message="service version cached")


def test_the_peer_ui_flow_at_each_level(servers: dict[int, str], service: Any, dclient: docker.DockerClient) -> None:
    detail_path = f"/services/{service.id}"
    for level, base in servers.items():
        cached(base, service.id, dclient)
        detail = requests.get(base + detail_path, headers=WRITER, timeout=10)
        assert detail.status_code == 200
        allow = detail.headers["Allow"]
        assert allow == DETAIL_ALLOW[level], (level, allow)
        assert requests.options(base + detail_path, headers=WRITER, timeout=10).headers["Allow"] == allow
        assert ("Accept-Patch" in detail.headers) is (level >= 2)
        methods = {m.strip() for m in allow.split(",")}
        before = spec_of(dclient, service.id)["Spec"]

        # the scale and image controls need PUT, the env control PATCH (merge patch, listed in Accept-Patch)
        replicas = 2 if before["Mode"]["Replicated"]["Replicas"] == 1 else 1
        scale = requests.put(f"{base}{detail_path}/scale", json={"replicas": replicas}, headers=WRITER, timeout=30)
        assert ("PUT" in methods) and scale.status_code == 200, (level, scale.text)
        cached(base, service.id, dclient)
        assert spec_of(dclient, service.id)["Spec"]["Mode"]["Replicated"]["Replicas"] == replicas
        image = service.tag if level != 2 else IMAGE
        answer = requests.put(f"{base}{detail_path}/image", json={"image": image}, headers=WRITER, timeout=30)
        assert answer.status_code == 200, (level, answer.text)
        assert spec_of(dclient, service.id)["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"].startswith(image)
        cached(base, service.id, dclient)
        env = requests.patch(f"{base}{detail_path}/env", data=json.dumps({"T_ALLOW": str(level)}),
                             headers={**WRITER, "Content-Type": MERGE}, timeout=30)
        current_env = spec_of(dclient, service.id)["Spec"]["TaskTemplate"]["ContainerSpec"].get("Env") or []
        if "PATCH" in methods:
            assert MERGE in detail.headers["Accept-Patch"]
            assert env.status_code == 200, (level, env.text)
            assert f"T_ALLOW={level}" in current_env
        else:
            assert env.status_code == 403 and env.json()["code"] == "OPS001", (level, env.text)
            assert not any(item.startswith("T_ALLOW=") for item in current_env)


def test_a_reader_sees_get_head_and_is_refused(servers: dict[int, str], service: Any,
                                              dclient: docker.DockerClient) -> None:
    base = servers[3]
    detail_path = f"/services/{service.id}"
    detail = requests.get(base + detail_path, headers=READER, timeout=10)
    assert detail.status_code == 200 and detail.headers["Allow"] == "GET, HEAD"
    assert "Accept-Patch" not in detail.headers
    assert requests.options(base + detail_path, headers=READER, timeout=10).headers["Allow"] == "GET, HEAD"
    version = spec_of(dclient, service.id)["Version"]["Index"]
    for method, path, body in (("PUT", "/scale", {"replicas": 3}), ("PUT", "/image", {"image": IMAGE}),
                               ("PUT", "/env", {"T_READER": "1"})):
        response = requests.request(method, base + detail_path + path, json=body, headers=READER, timeout=10)
        assert response.status_code == 403 and response.json()["code"] == "ACL002", (path, response.text)
    assert spec_of(dclient, service.id)["Version"]["Index"] == version
    sub = requests.get(f"{base}{detail_path}/env", headers=WRITER, timeout=10)   # sub-resources keep their own
    assert sub.headers["Allow"] == "GET, HEAD, PUT, PATCH"


def test_stacks_summary_is_reserved(servers: dict[int, str], dclient: docker.DockerClient) -> None:
    base = servers[3]
    member = sleeper(dclient, f"summary_t{SUFFIX}", labels={"com.docker.stack.namespace": "summary"})
    try:
        wait_for(lambda: any(row.get("name") == "summary" for row in requests.get(
            f"{base}/stacks/summary", headers=ADMIN, timeout=10).json()["items"]), 20, message="stack summary listed")
        for method in ("DELETE", "PUT", "PATCH", "POST"):
            response = requests.request(method, f"{base}/stacks/summary", headers=ADMIN, timeout=10)
            assert response.status_code == 405, (method, response.text)
            assert response.headers["Content-Type"].startswith("application/problem+json")
            assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "HEAD", "OPTIONS"}
        assert requests.options(f"{base}/stacks/summary", headers=ADMIN, timeout=10).headers["Allow"] == "GET, HEAD"
        assert dclient.api.inspect_service(member.id)["Spec"]["Name"] == f"summary_t{SUFFIX}"   # still there
    finally:
        member.remove()


def test_if_range_with_the_whole_lists_etag_gives_206(servers: dict[int, str]) -> None:
    base = servers[3]

    def ranged() -> requests.Response | None:   # the list may move between the two reads: retry
        whole = requests.get(f"{base}/networks", headers=ADMIN, timeout=10)
        answer = requests.get(f"{base}/networks", timeout=10,
                              headers={**ADMIN, "Range": "items=0-1", "If-Range": whole.headers["ETag"]})
        return answer if answer.status_code == 206 else None

    answer = wait_for(ranged, 10, message="a 206 under If-Range")
    assert isinstance(answer, requests.Response)
    assert answer.headers["Content-Range"].startswith("items 0-1/") and len(answer.json()["items"]) == 2
    stale = requests.get(f"{base}/networks", headers={**ADMIN, "Range": "items=0-1", "If-Range": '"stale"'}, timeout=10)
    assert stale.status_code == 200 and "Content-Range" not in stale.headers
