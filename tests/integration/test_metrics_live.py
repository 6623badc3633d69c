"""The Prometheus proxy against a real Prometheus (``tests.prometheus``: it scrapes itself, the lab engine
and a node exporter) through a real gunicorn: instant and range queries, the live stream (``initial`` then
``point``), its cap of 64, labels, status, cluster usage, and every MTR problem: unconfigured (the session
server has no Prometheus), unreachable (a closed port), bad PromQL, bad parameters."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, start_runtime_app, stop_gunicorn, wait_for
from tests.prometheus import PrometheusServer, prometheus  # noqa: F401 (the session fixture)

pytestmark = pytest.mark.integration
SSE = {"Accept": "text/event-stream"}
CAP = 64


@pytest.fixture(scope="module")
def metrics_server(docker_host: str, prometheus: PrometheusServer,  # noqa: F811
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn (gevent worker) with ``SERVICE_PROMETHEUS_URL`` pointing at the test Prometheus."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn-metrics") / "server.log"
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_PROMETHEUS_URL=prometheus.url,
                       SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state")))
    proc = launch_gunicorn(env, log_path, base)
    yield base
    stop_gunicorn(proc, log_path)


def problem(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["type"].endswith("/api/errors/" + code), body
    return body


class Events:
    """A bounded SSE reader: frames as (event, data, raw lines), with a deadline per call."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        self._chunks = response.iter_content(chunk_size=None)
        self._buffer = b""

    def next(self, deadline: float) -> tuple[str | None, str, list[bytes]]:
        while time.monotonic() < deadline:
            while b"\n\n" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\n\n", 1)
                lines = raw.split(b"\n")
                data = [line[6:] for line in lines if line.startswith(b"data: ")]
                if not data:
                    continue   # a comment (keepalive) or the retry hint
                event = next((line[7:].decode() for line in lines if line.startswith(b"event: ")), None)
                return event, b"\n".join(data).decode(), lines
            self._buffer += next(self._chunks)
        raise AssertionError("no SSE event before the deadline")


def open_stream(base: str, **params: str) -> requests.Response:
    return requests.get(f"{base}/metrics", params=params, headers=SSE, stream=True, timeout=(5, 30))


# ------------------------------------------------------------------------------------------------ JSON
def test_an_instant_query_is_prometheus_answer_verbatim(metrics_server: str,
                                                         prometheus: PrometheusServer) -> None:  # noqa: F811
    response = requests.get(f"{metrics_server}/metrics", params={"query": "up", "foo": "dropped"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"status", "data"}
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    jobs = {series["metric"]["job"]: series["value"][1] for series in body["data"]["result"]}
    assert jobs == {"prometheus": "1", "docker": "1", "node": "1"}


def test_the_lab_engine_metrics_come_through(metrics_server: str) -> None:
    response = requests.get(f"{metrics_server}/metrics", params={"query": "engine_daemon_engine_info"}, timeout=30)
    result = response.json()["data"]["result"]
    assert len(result) == 1 and result[0]["metric"]["job"] == "docker"


def test_start_and_end_make_a_range_query(metrics_server: str) -> None:
    def range_query() -> requests.Response:
        now = time.time()
        return requests.get(f"{metrics_server}/metrics", timeout=30, params={
            "query": 'up{job="prometheus"}', "start": f"{now - 30:.3f}", "end": f"{now:.3f}", "step": "1",
            "range": "99999"})

    # a Prometheus started moments ago has one scrape: the range has a second point a step later
    deadline = time.monotonic() + 15
    response = range_query()
    while time.monotonic() < deadline and response.ok and len(
            (response.json()["data"]["result"] or [{"values": []}])[0]["values"]) < 2:
        time.sleep(0.5)
        response = range_query()
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["resultType"] == "matrix"
    assert len(data["result"]) == 1 and len(data["result"][0]["values"]) >= 2


def test_a_bad_promql_is_mtr002_with_prometheus_message(metrics_server: str) -> None:
    response = requests.get(f"{metrics_server}/metrics", params={"query": "rate(up["}, timeout=30)
    body = problem(response, 502, "MTR002")
    assert body["detail"].startswith("Prometheus answered 400: ")
    assert "parse error" in body["detail"]


def test_a_bad_range_parameter_is_mtr002_with_prometheus_message(metrics_server: str) -> None:
    response = requests.get(f"{metrics_server}/metrics", params={"query": "up", "start": "x", "end": "y",
                                                                 "step": "5"}, timeout=30)
    assert 'invalid parameter "start"' in problem(response, 502, "MTR002")["detail"]


@pytest.mark.parametrize("params", [{}, {"query": ""}, {"query": "  "}])
def test_a_missing_query_is_mtr003(metrics_server: str, params: dict[str, str]) -> None:
    problem(requests.get(f"{metrics_server}/metrics", params=params, timeout=30), 400, "MTR003")
    problem(requests.get(f"{metrics_server}/metrics", params=params, headers=SSE, timeout=30), 400, "MTR003")


@pytest.mark.parametrize("step", ["4", "301", "x"])
def test_a_stream_step_outside_5_to_300_is_mtr004(metrics_server: str, step: str) -> None:
    response = requests.get(f"{metrics_server}/metrics", params={"query": "up", "step": step}, headers=SSE,
                            timeout=30)
    problem(response, 400, "MTR004")


def test_atom_is_not_acceptable(metrics_server: str) -> None:
    problem(requests.get(f"{metrics_server}/metrics.atom", params={"query": "up"}, timeout=30), 406, "API003")
    problem(requests.get(f"{metrics_server}/metrics", params={"query": "up"},
                         headers={"Accept": "application/atom+xml"}, timeout=30), 406, "API003")


# ---------------------------------------------------------------------------------------------- labels
def test_labels_and_label_values_are_proxied(metrics_server: str) -> None:
    names = requests.get(f"{metrics_server}/metrics/labels", timeout=30)
    assert names.status_code == 200 and names.headers["Cache-Control"] == "no-store"
    assert {"__name__", "job", "instance"} <= set(names.json()["data"])
    values = requests.get(f"{metrics_server}/metrics/labels/job", timeout=30).json()
    assert values == {"status": "success", "data": ["docker", "node", "prometheus"]}


def test_labels_forward_match(metrics_server: str) -> None:
    matched = requests.get(f"{metrics_server}/metrics/labels/job", timeout=30,
                           params={"match[]": ['up{job="node"}', 'up{job="docker"}']}).json()
    assert matched["data"] == ["docker", "node"]
    names = requests.get(f"{metrics_server}/metrics/labels", timeout=30,
                         params={"match[]": "node_uname_info"}).json()["data"]
    assert "nodename" in names and "daemon_id" not in names


def test_a_missing_label_name_is_mtr006(metrics_server: str) -> None:
    problem(requests.get(f"{metrics_server}/metrics/labels/", timeout=30), 400, "MTR006")


def test_a_bad_label_name_is_mtr002_with_prometheus_message(metrics_server: str) -> None:
    body = problem(requests.get(f"{metrics_server}/metrics/labels/a-b", timeout=30), 502, "MTR002")
    assert "invalid label name" in body["detail"]


# ---------------------------------------------------------------------------------- status and usage
def test_status_reports_prometheus_and_the_node_exporter(metrics_server: str) -> None:
    body = requests.get(f"{metrics_server}/metrics/status", timeout=30).json()
    assert body["@type"] == "MetricsStatus"
    assert body["prometheusConfigured"] is True and body["prometheusReachable"] is True
    assert "error" not in body
    assert body["nodeExporter"] == {"targets": 1, "nodes": 1}
    assert body["cadvisor"] is None


def test_cluster_metrics_come_from_the_node_exporter(metrics_server: str) -> None:
    def usage() -> dict[str, Any] | None:
        body: dict[str, Any] = requests.get(f"{metrics_server}/cluster/metrics", timeout=30).json()
        return body if body["cpu"] is not None else None   # the CPU rate needs two scrapes

    body = wait_for(usage, 20, interval=0.5, message="a CPU rate")
    assert isinstance(body, dict) and body["@type"] == "ClusterMetrics"
    assert body["cpu"]["total"] == os.cpu_count()
    for resource in ("cpu", "memory", "disk"):
        value = body[resource]
        assert 0 <= value["used"] <= value["total"] and 0 <= value["percent"] <= 100, value
    with open("/proc/meminfo") as meminfo:
        total_kib = int(meminfo.readline().split()[1])
    assert body["memory"]["total"] == total_kib * 1024


# ------------------------------------------------------------------------------------------------- SSE
def test_a_stream_sends_initial_then_points(metrics_server: str,
                                            prometheus: PrometheusServer) -> None:  # noqa: F811
    wait_for(lambda: len(prometheus.query_range('up{job="prometheus"}', 60, 5)) >= 2, 20, interval=0.5,
             message="10 s of samples in Prometheus")
    with open_stream(metrics_server, query='up{job="prometheus"}', step="5", range="60") as response:
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = Events(response)
        started = time.monotonic()
        event, data, lines = events.next(started + 15)
        assert event == "initial"
        initial = json.loads(data)
        assert initial["status"] == "success" and initial["data"]["resultType"] == "matrix"
        values = initial["data"]["result"][0]["values"]
        assert len(values) >= 2 and values[-1][0] - values[0][0] <= 60
        assert all(round(b - a, 3) == 5 for (a, _), (b, _) in itertools.pairwise(values))
        event, data, point_lines = events.next(started + 15)
        assert event == "point"
        assert 4 <= time.monotonic() - started <= 10
        point = json.loads(data)
        assert point["data"]["resultType"] == "vector" and point["data"]["result"][0]["value"][1] == "1"
        assert not any(line.startswith(b"id:") for line in lines + point_lines)


def test_a_failing_query_streams_query_error_events(metrics_server: str) -> None:
    with open_stream(metrics_server, query="rate(up[", step="5", range="60") as response:
        event, data, _ = Events(response).next(time.monotonic() + 15)
    assert event == "query_error"
    body = json.loads(data)
    assert body["errorType"] == "bad_data" and "parse error" in body["error"]


def opened(base: str) -> requests.Response | None:
    response = open_stream(base, query="up", step="300", range="60")
    if response.status_code == 200:
        return response
    problem(response, 429, "MTR005")
    response.close()
    return None


def test_the_65th_stream_is_refused_until_one_closes(metrics_server: str) -> None:
    streams: list[requests.Response] = []
    try:
        started = time.monotonic()
        for _ in range(CAP):   # streams of earlier tests may hold a slot for up to a second after closing
            stream = wait_for(lambda: opened(metrics_server), 10, interval=0.2, message="a free slot")
            assert isinstance(stream, requests.Response)
            streams.append(stream)
        assert time.monotonic() - started < 60
        refused = requests.get(f"{metrics_server}/metrics", params={"query": "up"}, headers=SSE, timeout=30)
        problem(refused, 429, "MTR005")
        assert refused.headers["Retry-After"] == "5"
    finally:
        for response in streams:
            response.close()

    def accepted() -> bool:
        with open_stream(metrics_server, query="up", step="300", range="60") as response:
            return response.status_code == 200

    wait_for(accepted, 15, interval=0.5, message="a stream accepted after the 64 closed")


# ------------------------------------------------------------------------------ unconfigured, unreachable
def test_without_prometheus_metrics_are_mtr001(server: str) -> None:
    problem(requests.get(f"{server}/metrics", params={"query": "up"}, timeout=30), 503, "MTR001")
    problem(requests.get(f"{server}/metrics", params={"query": "up"}, headers=SSE, timeout=30), 503, "MTR001")
    problem(requests.get(f"{server}/metrics/labels", timeout=30), 503, "MTR001")
    problem(requests.get(f"{server}/cluster/metrics", timeout=30), 503, "MTR001")
    status = requests.get(f"{server}/metrics/status", timeout=30).json()
    assert {k: status[k] for k in ("prometheusConfigured", "prometheusReachable", "nodeExporter", "cadvisor")} \
        == {"prometheusConfigured": False, "prometheusReachable": False, "nodeExporter": None, "cadvisor": None}


def test_an_unreachable_prometheus_is_mtr002(docker_host: str) -> None:
    app, runtime = start_runtime_app(docker_host, prometheus_url=f"http://127.0.0.1:{free_port()}")
    try:
        client = app.test_client()
        response = client.get("/metrics?query=up")
        assert response.status_code == 502
        assert response.get_json()["type"].endswith("/MTR002")
        assert "Prometheus is unreachable: Connection refused" in response.get_json()["detail"]
        status = client.get("/metrics/status").get_json()
        assert status["prometheusConfigured"] is True and status["prometheusReachable"] is False
        assert "Connection refused" in status["error"]
        assert client.get("/cluster/metrics").status_code == 502
    finally:
        runtime.stop()


def test_sigterm_ends_open_streams_promptly(docker_host: str, prometheus: PrometheusServer,  # noqa: F811
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    """A worker stop ends the metrics streams (their producers are killed), not gunicorn's graceful timeout."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn-metrics-stop") / "server.log"
    base = f"http://127.0.0.1:{port}"
    proc = launch_gunicorn(gunicorn_env(docker_host, port, SERVICE_PROMETHEUS_URL=prometheus.url,
                                        SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state"))), log_path, base)
    streams = [open_stream(base, query="up", step="300", range="60") for _ in range(3)]
    try:
        assert [s.status_code for s in streams] == [200, 200, 200]
        for stream in streams:
            assert Events(stream).next(time.monotonic() + 15)[0] == "initial"
        started = time.monotonic()
        proc.terminate()
        try:
            code = proc.wait(timeout=9)   # gunicorn's graceful timeout is 10 s
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("gunicorn held its open metrics streams until the graceful timeout", pytrace=False)
        assert code == 0, log_path.read_text()[-4000:]
        assert time.monotonic() - started < 5
        assert "Traceback" not in log_path.read_text(), log_path.read_text()[-4000:]
    finally:
        for stream in streams:
            stream.close()
