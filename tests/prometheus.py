"""A real Prometheus for tests (Debian ``prometheus``, installed by scripts/setup), as a session fixture.

Started on 127.0.0.1 at a free port with its storage in a temporary directory and a 1 s scrape interval.
It scrapes itself, the lab engine's metrics endpoint (``dockerd --metrics-addr``: ``SHOAL_LAB_METRICS_URL``
from /tmp/shoal-lab/shoal.env, which scripts/test exports) and a ``prometheus-node-exporter`` it starts
on 127.0.0.1 too (node metrics for ``/cluster/metrics`` and ``/metrics/status``). Every wait is bounded;
both processes are killed at teardown. A missing binary or a target that never comes up fails the
session loudly (no skips).

Use it from a test module with ``from tests.prometheus import prometheus  # noqa: F401`` and take the
``prometheus`` fixture: a :class:`PrometheusServer` (``.url``, ``.query(promql)``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.conftest import free_port, wait_for

SCRAPE_INTERVAL = "1s"
START_TIMEOUT = 30.0
TARGETS_TIMEOUT = 30.0
JOBS = ("prometheus", "docker", "node")


@dataclass(frozen=True, slots=True)
class PrometheusServer:
    url: str
    node_exporter: str     # host:port of the node exporter it scrapes
    engine_metrics: str    # host:port of the lab engine's metrics endpoint

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result list (raises on an error answer)."""
        response = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json()["data"]["result"]
        return result

    def query_range(self, promql: str, seconds: int, step: int) -> list[list[Any]]:
        """The values of the first series of a range query over the last ``seconds`` (empty if none)."""
        end = time.time()
        response = requests.get(f"{self.url}/api/v1/query_range", timeout=10, params={
            "query": promql, "start": f"{end - seconds:.3f}", "end": f"{end:.3f}", "step": str(step)})
        response.raise_for_status()
        result = response.json()["data"]["result"]
        return list(result[0]["values"]) if result else []


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: run scripts/setup (it installs the Debian package)", pytrace=False)
    return path


def _engine_metrics_target() -> str:
    url = os.environ.get("SHOAL_LAB_METRICS_URL")
    if not url:
        pytest.fail("SHOAL_LAB_METRICS_URL is not set: export the SHOAL_LAB_* lines of "
                    "/tmp/shoal-lab/shoal.env (scripts/test does)", pytrace=False)
    netloc = urlsplit(url).netloc
    assert netloc, url
    return netloc


def _config(self_target: str, engine_target: str, node_target: str) -> str:
    return (f"global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  evaluation_interval: {SCRAPE_INTERVAL}\n"
            "scrape_configs:\n"
            f"  - job_name: prometheus\n    static_configs:\n      - targets: ['{self_target}']\n"
            f"  - job_name: docker\n    static_configs:\n      - targets: ['{engine_target}']\n"
            f"  - job_name: node\n    static_configs:\n      - targets: ['{node_target}']\n")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _all_targets_up(url: str) -> bool:
    response = requests.get(f"{url}/api/v1/query", params={"query": "up == 1"}, timeout=2)
    jobs = {series["metric"].get("job") for series in response.json()["data"]["result"]}
    return set(JOBS) <= jobs


def _ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        raise pytest.fail.Exception(f"prometheus exited with {proc.returncode}")
    return requests.get(f"{url}/-/ready", timeout=2).status_code == 200


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Prometheus + node exporter on 127.0.0.1, every target up (``up == 1``) before the first test."""
    prometheus_bin, exporter_bin = _binary("prometheus"), _binary("prometheus-node-exporter")
    work = tmp_path_factory.mktemp("prometheus")
    engine_target = _engine_metrics_target()
    node_target = f"127.0.0.1:{free_port()}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (work / "prometheus.yml").write_text(_config(f"127.0.0.1:{port}", engine_target, node_target))
    exporter_log = (work / "node-exporter.log").open("wb")
    exporter = subprocess.Popen([exporter_bin, f"--web.listen-address={node_target}"],
                                stdout=exporter_log, stderr=subprocess.STDOUT)
    prometheus_log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen([prometheus_bin, f"--config.file={work / 'prometheus.yml'}",
                             f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                            stdout=prometheus_log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _ready(url, proc), START_TIMEOUT, interval=0.2, message="prometheus /-/ready")
        wait_for(lambda: _all_targets_up(url), TARGETS_TIMEOUT, interval=0.5,
                 message=f"targets {', '.join(JOBS)} up (engine metrics at {engine_target})")
    except BaseException:
        _stop(proc)
        _stop(exporter)
        print(Path(work / "prometheus.log").read_text()[-3000:])
        raise
    yield PrometheusServer(url=url, node_exporter=node_target, engine_metrics=engine_target)
    _stop(proc)
    _stop(exporter)
    prometheus_log.close()
    exporter_log.close()
