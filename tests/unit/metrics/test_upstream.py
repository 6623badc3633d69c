"""The Prometheus client: URLs keep the configured prefix and cannot be bent by a client; answers are
bounded in size and time; every failure is MTR002 (with Prometheus's message) or MTR007."""

from __future__ import annotations

import time

import pytest

from app.metrics.upstream import Limits, PrometheusClient, UpstreamError, build_url
from tests.conftest import free_port
from tests.unit.metrics.fake_upstream import FakePrometheus, endless, json_answer, slow

SUCCESS = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "up", "job": "node"}, "value": [1700000000.5, "1"]}]}}


@pytest.mark.parametrize(("base", "url"), [
    ("http://prom:9090", "http://prom:9090/api/v1/query?query=up"),
    ("http://prom:9090/", "http://prom:9090/api/v1/query?query=up"),
    ("https://example.test/monitoring/prom", "https://example.test/monitoring/prom/api/v1/query?query=up"),
])
def test_urls_keep_the_configured_path_prefix(base: str, url: str) -> None:
    assert build_url(base, ("api", "v1", "query"), [("query", "up")]) == url


def test_path_segments_and_parameters_are_encoded_whole() -> None:
    url = build_url("http://prom:9090/p", ("api", "v1", "label", "../../admin?x=1#", "values"),
                    [("match[]", 'up{job="a&b"}'), ("match[]", "x y")])
    assert url == ("http://prom:9090/p/api/v1/label/..%2F..%2Fadmin%3Fx%3D1%23/values"
                   "?match%5B%5D=up%7Bjob%3D%22a%26b%22%7D&match%5B%5D=x+y")


@pytest.mark.parametrize("base", ["ftp://prom", "http://", "http://prom?x=1", "prom:9090"])
def test_a_base_that_is_no_http_url_is_mtr007(base: str) -> None:
    with pytest.raises(UpstreamError) as caught:
        build_url(base, ("api",))
    assert caught.value.code == "MTR007"


def test_a_2xx_body_comes_back_verbatim_and_decoded() -> None:
    with FakePrometheus() as fake:
        fake.routes["/prefix/api/v1/query"] = json_answer(SUCCESS)
        client = PrometheusClient(fake.url + "/prefix")
        assert client.get(("api", "v1", "query"), [("query", "up")]) == json_answer_bytes()
        samples = client.vector("up")
    assert [(s.labels["job"], s.value) for s in samples] == [("node", 1.0)]
    assert fake.requests[0] == ("/prefix/api/v1/query", "query=up")


def json_answer_bytes() -> bytes:
    import json
    return json.dumps(SUCCESS).encode()


def test_a_prometheus_error_is_mtr002_with_its_own_message_and_type() -> None:
    error = {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": parse error'}
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = json_answer(error, "400 Bad Request")
        with pytest.raises(UpstreamError) as caught:
            PrometheusClient(fake.url).get(("api", "v1", "query"), [("query", "rate(")])
    assert caught.value.code == "MTR002"
    assert caught.value.detail == 'Prometheus answered 400: invalid parameter "query": parse error'
    assert caught.value.error_type == "bad_data"


def test_a_non_json_error_body_is_quoted() -> None:
    with FakePrometheus() as fake, pytest.raises(UpstreamError) as caught:   # no route: 404 text
        PrometheusClient(fake.url).get(("api", "v1", "query"))
    assert caught.value.detail == "Prometheus answered 404: 404 page not found"


def test_redirects_are_not_followed() -> None:
    def redirect(environ, start_response):  # type: ignore[no-untyped-def]
        start_response("302 Found", [("Location", "http://127.0.0.1:1/elsewhere")])
        return [b""]
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = redirect
        with pytest.raises(UpstreamError) as caught:
            PrometheusClient(fake.url).get(("api", "v1", "query"))
    assert caught.value.code == "MTR002"
    assert "302" in caught.value.detail


def test_a_body_over_the_cap_is_cut_off() -> None:
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = endless(b"x" * 8192)
        client = PrometheusClient(fake.url, Limits(max_bytes=100_000))
        started = time.monotonic()
        with pytest.raises(UpstreamError) as caught:
            client.get(("api", "v1", "query"))
    assert caught.value.code == "MTR002"
    assert caught.value.detail == "The Prometheus answer is larger than 100000 bytes."
    assert time.monotonic() - started < 5


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = json_answer({"status": "success", "data": "x" * 2000})
        with pytest.raises(UpstreamError) as caught:
            PrometheusClient(fake.url, Limits(max_bytes=1024)).get(("api", "v1", "query"))
    assert "larger than 1024 bytes" in caught.value.detail


def test_the_default_cap_is_10_mib_and_the_timeout_30_s() -> None:
    limits = Limits()
    assert (limits.max_bytes, limits.total_timeout) == (10 * 1024 * 1024, 30.0)


def test_a_slow_answer_times_out_as_mtr002() -> None:
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = slow(5)
        client = PrometheusClient(fake.url, Limits(total_timeout=0.3))
        started = time.monotonic()
        with pytest.raises(UpstreamError) as caught:
            client.get(("api", "v1", "query"))
    assert caught.value.detail == "Prometheus did not answer within 0.3 s."
    assert time.monotonic() - started < 2


def test_a_closed_port_is_unreachable_without_naming_the_host() -> None:
    client = PrometheusClient(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(UpstreamError) as caught:
        client.get(("api", "v1", "query"), [("query", "up")])
    assert caught.value.code == "MTR002"
    assert caught.value.detail.startswith("Prometheus is unreachable: ")
    assert "refused" in caught.value.detail
    assert "127.0.0.1" not in caught.value.detail


def test_a_2xx_body_that_is_not_json_fails_get_json() -> None:
    def text(environ, start_response):  # type: ignore[no-untyped-def]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello"]
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = text
        with pytest.raises(UpstreamError) as caught:
            PrometheusClient(fake.url).vector("up")
    assert caught.value.detail == "Prometheus answered with a body that is not JSON."
