"""A client no one here wrote: the official MCP TypeScript SDK (npm ``@modelcontextprotocol/sdk``, installed
by ``scripts/setup`` into ``.tools/mcp-ts``) runs the core session against gunicorn on the lab swarm — list
tools, resources and templates, read the cluster and a service, call ``search`` and ``scale_service``,
subscribe to the service and receive ``notifications/resources/updated`` after the scale (checked against
``docker inspect``), a missing resource read as an error, then unsubscribe and end the session."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import docker
import pytest

from tests.conftest import REPO, free_port, gunicorn_env, launch_gunicorn, stop_gunicorn
from tests.integration.engine_state import sleeper
from tests.integration.mcp_waits import wait_cached

TOOLS = REPO / ".tools" / "mcp-ts"
SCRIPT = REPO / "tests" / "clients" / "mcp_session.mjs"


@pytest.fixture(scope="module")
def mcp_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn-mcp-ts") / "server.log"
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_OPERATIONS_LEVEL="1",
                       SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state")))
    proc = launch_gunicorn(env, log_path, base)
    yield base
    stop_gunicorn(proc, log_path)


@pytest.fixture
def service(dclient: docker.DockerClient) -> Iterator[str]:
    name = f"t-mcp-ts-{uuid.uuid4().hex[:6]}"
    created = sleeper(dclient, name, replicas=1)
    yield name
    created.remove()


def run_session(url: str, name: str, replicas: int) -> dict[str, object]:
    if shutil.which("node") is None or not (TOOLS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the MCP TypeScript SDK is missing: run scripts/setup", pytrace=False)
    script = TOOLS / f"session-{uuid.uuid4().hex[:8]}.mjs"   # ES modules resolve packages from their own folder
    shutil.copy(SCRIPT, script)
    try:
        proc = subprocess.run(["node", str(script), url, name, str(replicas)], capture_output=True, text=True,
                              timeout=90)
    finally:
        script.unlink()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary from node (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    summary: dict[str, object] = json.loads(lines[-1])
    assert proc.returncode == 0 and "error" not in summary, json.dumps(summary, indent=1)
    return summary


def test_the_typescript_sdk_runs_a_core_session(mcp_server: str, service: str, engine: docker.APIClient,
                                                 dclient: docker.DockerClient) -> None:
    wait_cached(mcp_server, f"/services/{dclient.services.get(service).id}")
    summary = run_session(f"{mcp_server}/mcp", service, 2)
    assert summary["protocolVersion"] == "2025-11-25" and summary["sessionId"]
    tools = summary["tools"]
    assert isinstance(tools, list) and "scale_service" in tools and "search" in tools
    assert "remove_service" not in tools            # tier 3 is above operations level 1
    assert summary["resources"] == ["service://cluster", "service://history", "service://recommendations"]
    templates = summary["templates"]
    assert isinstance(templates, list) and len(templates) == 9 and "service://services/{id}" in templates
    assert summary["clusterMime"] == "application/json"
    assert summary["searchIsError"] is False and summary["searchText"] is True
    assert summary["scaleIsError"] is False, summary["scaleText"]
    updated = summary["updatedAfterMs"]
    assert isinstance(updated, int) and updated <= 1000, summary
    assert summary["missingRead"] != "read"
    spec = engine.inspect_service(service)["Spec"]
    assert spec["Mode"]["Replicated"]["Replicas"] == 2
