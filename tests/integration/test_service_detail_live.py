"""Service detail insights against the lab engine, over HTTP through gunicorn: ``integrations`` from the
labels a service is created with, ``changes`` after ``docker service update`` (the CLI, as an operator runs
it, with ``--no-resolve-image``: the lab has no registry)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import requests

from tests.conftest import wait_for
from tests.integration.engine_state import IMAGE, sleeper

pytestmark = pytest.mark.integration
VISIBLE_WITHIN = 5.0


def docker_cli() -> str:
    """The same CLI scripts/lab-swarm uses: $SHOAL_LAB_DOCKER, Debian's /usr/bin/docker, else PATH."""
    configured = os.environ.get("SHOAL_LAB_DOCKER")
    if configured:
        return configured
    if os.access("/usr/bin/docker", os.X_OK):
        return "/usr/bin/docker"
    found = shutil.which("docker")
    if found is None:
        pytest.fail("no docker CLI found (package docker.io)", pytrace=False)
    return found


def service_update(docker_host: str, service_id: str, *args: str) -> None:
    command = [docker_cli(), "service", "update", "--detach", "--no-resolve-image", *args, service_id]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DOCKER_HOST": docker_host})
    assert proc.returncode == 0, f"{' '.join(command)} failed: {proc.stderr}"


@pytest.fixture(scope="module")
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture
def second_tag(dclient: docker.DockerClient) -> Iterator[str]:
    """Another name for the lab's local image, so ``--image`` can change without a registry."""
    repository, tag = "local/busybox", f"shoal-it-{uuid.uuid4().hex[:8]}"
    assert dclient.images.get(IMAGE).tag(repository, tag)
    yield f"{repository}:{tag}"
    dclient.images.remove(f"{repository}:{tag}")  # only untags: local/busybox:latest keeps the image


@pytest.fixture
def labelled(dclient: docker.DockerClient, second_tag: str) -> Iterator[Any]:
    """A sleeper with traefik and diun labels and one variable; removed even when the test fails."""
    name = f"shoal-it-{uuid.uuid4().hex[:8]}"
    labels = {"traefik.enable": "true",
              f"traefik.http.routers.{name}.rule": "Host(`insights.lab`)",
              f"traefik.http.routers.{name}.entrypoints": "web",
              f"traefik.http.services.{name}.loadbalancer.server.port": "8080",
              f"traefik.http.routers.{name}-tls.rule": "Host(`insights.lab`)",
              f"traefik.http.routers.{name}-tls.tls.certresolver": "lab",
              f"traefik.http.routers.{name}-tls.tls.domains[0].main": "insights.lab",
              f"traefik.http.routers.{name}-tls.tls.domains[0].sans": "a.insights.lab,b.insights.lab",
              "diun.enable": "true", "diun.watch_repo": "false"}
    service = sleeper(dclient, name, labels=labels, env=["A=1"])
    try:
        yield service
    finally:
        service.remove()


def detail(server: str, service_id: str) -> dict[str, Any]:
    response = requests.get(f"{server}/services/{service_id}", timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_integrations_appear_and_changes_follow_each_update(server: str, docker_host: str, labelled: Any,
                                                            second_tag: str) -> None:
    service_id, name = labelled.id, labelled.name
    created = wait_for(lambda: requests.get(f"{server}/services/{service_id}", timeout=10).status_code == 200,
                       VISIBLE_WITHIN, interval=0.05, message="the new service in the API")
    assert created
    body = detail(server, service_id)
    assert "changes" not in body, "a service never updated has no previous spec"
    diun, traefik = body["integrations"]
    assert diun == {"name": "diun", "enabled": True, "watchRepo": False,
                    "labels": {"diun.enable": "true", "diun.watch_repo": "false"}}
    assert (traefik["name"], traefik["enabled"]) == ("traefik", True)
    assert traefik["routers"] == [{"name": name, "protocol": "http", "rule": "Host(`insights.lab`)",
                                   "entrypoints": ["web"], "middlewares": []},   # TLS off: no tls member
                                  {"name": f"{name}-tls", "protocol": "http", "rule": "Host(`insights.lab`)",
                                   "entrypoints": [], "middlewares": [],
                                   "tls": {"certResolver": "lab", "domains": [
                                       {"main": "insights.lab", "sans": ["a.insights.lab", "b.insights.lab"]}]}}]
    assert traefik["services"] == [{"name": name, "protocol": "http", "port": 8080}]

    service_update(docker_host, service_id, "--image", second_tag,
                   "--label-add", f"traefik.http.routers.{name}.middlewares=compress", "--env-add", "B=2")
    first = [
        {"field": f'Labels["traefik.http.routers.{name}.middlewares"]', "new": "compress"},
        {"field": "TaskTemplate.ContainerSpec.Env[\"B\"]", "new": "2"},
        {"field": "TaskTemplate.ContainerSpec.Image", "old": IMAGE, "new": second_tag},
    ]
    wait_for(lambda: detail(server, service_id).get("changes") == first, VISIBLE_WITHIN, interval=0.05,
             message=f"changes {first}")
    body = detail(server, service_id)
    assert body["integrations"][1]["routers"][0]["middlewares"] == ["compress"]
    assert body["service"]["PreviousSpec"]["TaskTemplate"]["ContainerSpec"]["Image"] == IMAGE

    service_update(docker_host, service_id, "--label-rm", "diun.enable", "--label-rm", "diun.watch_repo",
                   "--env-rm", "A")
    second = [
        {"field": 'Labels["diun.enable"]', "old": "true"},
        {"field": 'Labels["diun.watch_repo"]', "old": "false"},
        {"field": "TaskTemplate.ContainerSpec.Env[\"A\"]", "old": "1"},
    ]
    wait_for(lambda: detail(server, service_id).get("changes") == second, VISIBLE_WITHIN, interval=0.05,
             message=f"changes {second} (against the first update, not the creation)")
    assert [item["name"] for item in detail(server, service_id)["integrations"]] == ["traefik"]
