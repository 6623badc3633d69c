"""The Prometheus checks against a real Prometheus (``tests.prometheus``: node exporter on 127.0.0.1).

Every query of a run is accepted by a real Prometheus (cAdvisor ones included: no series, no error). The
exporter reports this machine's hostname, which is not the lab swarm node's (``shoal-n1`` runs in a
namespace), so the hostname mapping is shown on a cache holding the lab node renamed to this hostname:
healthy disk and memory give no finding, a lowered threshold gives the finding on that node."""

from __future__ import annotations

import copy
import socket
import time
from typing import Any

import docker
import pytest

from app.cache.store import Cache
from app.metrics.upstream import PrometheusClient
from app.recommendations import prometheus_checks as pc
from app.recommendations.findings import Finding
from app.resources import ResourceKind
from tests.conftest import start_runtime_app
from tests.prometheus import PrometheusServer, prometheus  # noqa: F401 (the session fixture)

pytestmark = pytest.mark.integration


def run(cache: Cache, url: str) -> tuple[pc.PrometheusChecks, dict[tuple[str, str], list[Finding]]]:
    published: dict[tuple[str, str], list[Finding]] = {}
    runner = pc.PrometheusChecks(cache, PrometheusClient(url, pc.QUERY_LIMITS),
                                 lambda subject, found: published.__setitem__(subject, found), 600, time.time)
    runner.run_once()
    return runner, published


def renamed_lab_node(engine: docker.APIClient) -> tuple[Cache, dict[str, Any]]:
    raw = copy.deepcopy(engine.inspect_node(engine.info()["Swarm"]["NodeID"]))
    raw["Description"]["Hostname"] = socket.gethostname()
    cache = Cache()
    cache.replace_all({ResourceKind.NODE: [raw]})
    return cache, raw


def test_node_checks_on_this_machine(engine: docker.APIClient, prometheus: PrometheusServer,  # noqa: F811
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    names = {series["metric"].get("nodename") for series in prometheus.query("node_uname_info")}
    assert names == {socket.gethostname()}
    cache, raw = renamed_lab_node(engine)
    runner, published = run(cache, prometheus.url)
    assert runner.failures == {pc.NODES: 0, pc.SERVICES: 0}      # every query valid
    assert published == {pc.NODES: [], pc.SERVICES: []}            # healthy disk and memory, no containers

    monkeypatch.setattr(pc, "DISK_FULL", 0.0)
    monkeypatch.setattr(pc, "MEMORY_PRESSURE", 0.0)
    runner, published = run(cache, prometheus.url)
    found = {f.check: f for f in published[pc.NODES]}
    assert set(found) == {"node-disk-full", "node-memory-pressure"}
    for finding in found.values():
        assert (finding.resource_id, finding.resource_name) == (raw["ID"], socket.gethostname())
        assert finding.fix_action == f"PUT /nodes/{raw['ID']}/availability"
    memory = found["node-memory-pressure"].to_json("")
    assert 0 < memory["current"] < memory["configured"]


def test_in_process_app_runs_them_and_serves_the_findings(docker_host: str, engine: docker.APIClient,
                                                          prometheus: PrometheusServer,  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab node's hostname matches no exporter: the run succeeds with no node finding even at a zero
    threshold; a finding published for the lab node is served by /recommendations with its figures."""
    monkeypatch.setattr(pc, "DISK_FULL", 0.0)
    app, runtime = start_runtime_app(docker_host, prometheus_url=prometheus.url)
    try:
        checks = runtime.recommendations.prometheus
        assert checks is not None
        checks.run_once()
        assert checks.failures == {pc.NODES: 0, pc.SERVICES: 0}
        assert not [f for f in runtime.recommendations.findings() if f.check == "node-disk-full"]
        node = engine.inspect_node(engine.info()["Swarm"]["NodeID"])
        runtime.recommendations.publish(pc.NODES, [pc.MetricFinding(
            "node-memory-pressure", "critical", "node", node["ID"], node["Description"]["Hostname"], "m", "f",
            f"PUT /nodes/{node['ID']}/availability", "memory", current=95, configured=100)])
        body = app.test_client().get("/recommendations?check=node-memory-pressure",
                                     headers={"Accept": "application/json"}).get_json()
        assert [(item["targetName"], item["current"], item["configured"]) for item in body["items"]] == [
            (node["Description"]["Hostname"], 95, 100)]
    finally:
        runtime.stop()
