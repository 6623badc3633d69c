"""The metrics views through the app (test client, fake engine) and a fake Prometheus on 127.0.0.1:
problems, verbatim bodies, headers, the size cap as seen by a client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from flask.testing import FlaskClient

from app.metrics.proxy import EXTENSION_KEY, metrics_of
from app.metrics.upstream import Limits, PrometheusClient
from tests.fakes import FakeEngine
from tests.unit.metrics.fake_upstream import FakePrometheus, endless, json_answer
from tests.unit.support import Harness, build_harness

ANSWER = {"status": "success", "data": {"resultType": "vector", "result": []}}


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        yield fake


def started(fake_engine: FakeEngine, **settings: object) -> Harness:
    harness = build_harness(fake_engine, **settings)
    harness.start()
    return harness


@pytest.fixture
def client(fake_engine: FakeEngine, fake_prometheus: FakePrometheus) -> Iterator[FlaskClient]:
    harness = started(fake_engine, prometheus_url=fake_prometheus.url + "/prom/")
    yield harness.app.test_client()
    harness.stop()


def code_of(response) -> str:  # type: ignore[no-untyped-def]
    return str(response.get_json()["type"]).rsplit("/", 1)[1]


def test_unconfigured_is_mtr001_but_bad_parameters_come_first(fake_engine: FakeEngine) -> None:
    harness = started(fake_engine)
    try:
        client = harness.app.test_client()
        assert code_of(client.get("/metrics?query=up")) == "MTR001"
        assert code_of(client.get("/metrics")) == "MTR003"
        sse = {"Accept": "text/event-stream"}
        assert code_of(client.get("/metrics?query=up&step=4", headers=sse)) == "MTR004"
        assert code_of(client.get("/metrics?query=up", headers=sse)) == "MTR001"
        assert code_of(client.get("/cluster/metrics")) == "MTR001"
        assert code_of(client.get("/metrics/labels/job")) == "MTR001"
        assert client.get("/metrics/status").get_json()["prometheusConfigured"] is False
    finally:
        harness.stop()


def test_a_query_is_forwarded_below_the_prefix_and_answered_verbatim(client: FlaskClient,
                                                                     fake_prometheus: FakePrometheus) -> None:
    fake_prometheus.routes["/prom/api/v1/query"] = json_answer(ANSWER)
    response = client.get("/metrics?query=sum(up)&time=5&other=x&match[]=y")
    assert response.status_code == 200
    assert response.get_data() == json_answer_body()
    assert response.headers["Cache-Control"] == "no-store"
    assert response.content_type == "application/json"
    assert fake_prometheus.requests == [("/prom/api/v1/query", "query=sum%28up%29&time=5")]


def json_answer_body() -> bytes:
    import json
    return json.dumps(ANSWER).encode()


def test_label_values_encode_the_name(client: FlaskClient, fake_prometheus: FakePrometheus) -> None:
    response = client.get("/metrics/labels/a%3Fb?match[]=up&start=1")
    assert code_of(response) == "MTR002"    # the fake has no such route: its 404 text comes back
    assert response.get_json()["detail"] == "Prometheus answered 404: 404 page not found"
    assert fake_prometheus.requests == [("/prom/api/v1/label/a?b/values", "match%5B%5D=up")]


def test_an_oversized_answer_is_mtr002(client: FlaskClient, fake_prometheus: FakePrometheus) -> None:
    app = client.application
    capped = PrometheusClient(fake_prometheus.url + "/prom", Limits(max_bytes=50_000))
    app.extensions[EXTENSION_KEY] = replace(metrics_of(app), client=capped)
    fake_prometheus.routes["/prom/api/v1/labels"] = endless(b"[" * 4096)
    response = client.get("/metrics/labels")
    assert response.status_code == 502
    assert response.get_json()["detail"] == "The Prometheus answer is larger than 50000 bytes."


def test_a_blank_label_name_is_mtr006(client: FlaskClient) -> None:
    assert code_of(client.get("/metrics/labels/")) == "MTR006"
    assert code_of(client.get("/metrics/labels/%20")) == "MTR006"


def test_the_proxy_and_the_self_metrics_live_side_by_side(client: FlaskClient,
                                                          fake_prometheus: FakePrometheus) -> None:
    """Both keep per-app state in app.extensions: a proxied query must not replace /-/metrics' registry."""
    fake_prometheus.routes["/prom/api/v1/query"] = json_answer(ANSWER)
    assert client.get("/metrics?query=up").status_code == 200
    response = client.get("/-/metrics")
    assert response.status_code == 200 and b"shoal_" in response.data
    assert client.get("/metrics?query=up").status_code == 200
