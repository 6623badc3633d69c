"""The metrics and topology pages against the lab swarm, a real Prometheus (``tests.prometheus``: node
exporter, the lab engine, itself) and a real gunicorn, in headless Chromium: the metrics page draws its
node charts (a uPlot canvas, points from the stream's ``initial`` and then ``point`` events) over ONE
metrics stream; a PromQL query of the operator's charts live and tabulates; without Prometheus the page says
metrics are off; the topology page inlines Graphviz's SVG naming the lab's services, linked to their pages,
and the placement tab draws the nodes; no console error (the CSP included), axe clean."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    screenshot,
    visit,
)
from tests.integration.engine_state import IMAGE, TEST_LABEL
from tests.prometheus import PrometheusServer, prometheus  # noqa: F401 - the session fixture

pytestmark = pytest.mark.integration
POINTS_WITHIN = 30_000     # ms: the stream's initial event comes at connect; rate() needs two 1 s scrapes


@pytest.fixture(scope="module")
def metrics_server(docker_host: str, prometheus: PrometheusServer,  # noqa: F811
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn (gevent worker) following the lab, with ``SERVICE_PROMETHEUS_URL`` at the test Prometheus."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn-dash-metrics") / "server.log"
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_PROMETHEUS_URL=prometheus.url,
                       SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state")))
    proc = launch_gunicorn(env, log_path, base)
    yield base
    stop_gunicorn(proc, log_path)


def html(url: str, **params: str) -> tuple[int, str]:
    """A page at any status. Not through ``requests``: the suite checks every ``requests`` answer against
    the OpenAPI document, which describes the JSON forms (a problem's page is text/html at its status)."""
    target = url + ("?" + urllib.parse.urlencode(params) if params else "")
    request = urllib.request.Request(target, headers={"Accept": "text/html"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def points(page: Any, chart: str) -> int:
    return int(page.get_attribute(f'[data-chart="{chart}"]', "data-points") or 0)


def lab_service_names(server: str) -> list[str]:
    body = requests.get(f"{server}/services", params={"limit": 200}, timeout=15).json()
    return [item["Spec"]["Name"] for item in body["items"]]


# ------------------------------------------------------------------------------------------------ metrics
def test_cluster_metrics_page_draws_node_charts_from_one_stream(metrics_server: str,
                                                               browser: Any) -> None:  # noqa: F811
    streams: list[str] = []    # every event stream the page opens, counted from its first request
    seen = visit(browser, f"{metrics_server}/cluster/metrics?step=5", wait_for='[data-chart="cpu_node"]',
                 on_request=lambda req: streams.append(req.url)
                 if "text/event-stream" in (req.headers.get("accept") or "") else None)
    page = seen.page
    # Without JS the snapshot table already has the node-exporter host (server-rendered instant answer).
    assert page.locator('[data-chart="mem_node"] table.snapshot tbody td.num').count() >= 1
    page.wait_for_function("""() => ['cpu_node', 'mem_node'].every(id => {
        const fig = document.querySelector(`[data-chart="${id}"]`);
        return fig && fig.querySelector('canvas') && Number(fig.dataset.points || 0) >= 2; })""",
                           timeout=POINTS_WITHIN)
    first = points(page, "mem_node")
    assert page.locator('[data-chart="mem_node"] .u-legend').count() == 1
    # A point event every 5 s adds to the history (bounded wait: four steps).
    page.wait_for_function(
        f"""() => Number(document.querySelector('[data-chart="mem_node"]').dataset.points) > {first}""",
        timeout=20_000)
    # One metrics stream for the whole page (the four charts share one query), and no page event stream.
    assert page.get_attribute("main", "data-stream") is None
    # (a stream the browser reopened after a drop is the same one again: never two kinds, never /events)
    assert streams and all("/metrics?" in url and "/events" not in url for url in streams), streams
    assert len({url.split("&lastEventId=")[0] for url in streams}) == 1, streams
    assert "chart" in page.get_attribute("[data-metrics]", "data-query")
    screenshot(page, "metrics")
    assert_accessible(page)
    seen.assert_clean()


def test_a_query_of_the_operator_charts_live(metrics_server: str, browser: Any) -> None:  # noqa: F811
    seen = visit(browser, f"{metrics_server}/metrics?query=up&step=5", wait_for='[data-chart="query"]',
                 color_scheme="dark")   # axe checks the dark theme's contrast here
    page = seen.page
    rows = page.locator("table.list tbody tr")
    assert rows.count() >= 3     # up{job=prometheus}, the engine, the node exporter
    assert 'job="prometheus"' in page.inner_text("table.list")
    page.wait_for_function("""() => { const f = document.querySelector('[data-chart="query"]');
        return f.querySelector('canvas') && Number(f.dataset.series) >= 3; }""", timeout=POINTS_WITHIN)
    assert_accessible(page)
    seen.assert_clean()


def test_a_bad_query_shows_prometheus_problem(metrics_server: str, browser: Any) -> None:  # noqa: F811
    status, text = html(f"{metrics_server}/metrics", query="sum((")
    assert status == 502
    assert "MTR002" in text and "parse error" in text
    assert 'aria-invalid="true"' in text


def test_cluster_usage_page_shows_meters(metrics_server: str) -> None:
    status, text = html(f"{metrics_server}/cluster/metrics")
    assert status == 200, text
    assert text.count("<meter") >= 2      # memory and disk at least (CPU needs two scrapes in 1 min)


def test_metrics_page_without_a_query_has_the_charts_too(metrics_server: str) -> None:
    """/metrics without ?query= is the API's 400 MTR003, rendered as the default charts and the query form."""
    status, text = html(f"{metrics_server}/metrics")
    assert status == 400
    assert text.count("data-chart=") == 4 and 'id="promql-query"' in text


def test_without_prometheus_the_page_says_metrics_are_off(server: str, browser: Any) -> None:  # noqa: F811
    seen = visit(browser, f"{server}/metrics/status", wait_for=".metrics-off")
    text = seen.page.inner_text(".metrics-off")
    assert "no Prometheus is configured" in text and "SERVICE_PROMETHEUS_URL" in text
    assert_accessible(seen.page)
    seen.assert_clean()
    for path, params in (("/metrics", {}), ("/cluster/metrics", {}), ("/metrics", {"query": "up"})):
        status, text = html(f"{server}{path}", **params)
        assert "no Prometheus is configured" in text and "data-chart" not in text, path
        assert status == (400 if not params and path == "/metrics" else 503), path


# ------------------------------------------------------------------------------------------------ topology
def test_topology_page_inlines_the_graph_with_the_lab_services(server: str, browser: Any) -> None:  # noqa: F811
    names = lab_service_names(server)
    assert names, "the lab's demo stack has services"
    seen = visit(browser, f"{server}/topology", wait_for=".topology-svg svg")
    page = seen.page
    svg_text = page.inner_text(".topology-svg")
    for name in names:
        assert name in svg_text, (name, svg_text[:500])
    # Every service box links to its page (base path included: none here).
    hrefs = page.eval_on_selector_all(".topology-svg a", "els => els.map(a => a.getAttribute('xlink:href'))")
    assert len([h for h in hrefs if h and h.startswith("/services/")]) == len(names)
    # No style attribute inside the SVG (the CSP would block it and log an error).
    assert page.locator(".topology-svg [style]").count() == 0
    # The table alternative has the same services.
    assert page.locator("details table.list tbody tr").count() >= len(names)
    screenshot(page, "topology")
    assert_accessible(page)
    page.click(".topology-svg a >> nth=0")
    page.wait_for_url("**/services/*", timeout=10_000)
    seen.assert_clean()


def test_topology_placement_tab_draws_the_nodes(server: str, browser: Any) -> None:  # noqa: F811
    nodes = requests.get(f"{server}/nodes", timeout=15).json()["items"]
    seen = visit(browser, f"{server}/topology?view=placement", wait_for=".topology-svg svg", color_scheme="dark")
    page = seen.page
    text = page.inner_text(".topology-svg")
    for node in nodes:
        assert node["Description"]["Hostname"] in text
    assert page.get_attribute("main", "data-stream") == "/events?types=node,service,network,task"
    assert page.get_attribute('.tabs a[aria-current="page"]', "href") == "/topology?view=placement"
    assert_accessible(page)
    seen.assert_clean()


def test_topology_drawing_follows_a_new_service(server: str, browser: Any, docker_host: str) -> None:  # noqa: F811
    seen = visit(browser, f"{server}/topology", wait_for=".topology-svg svg")
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    name = f"dashtopo-{uuid.uuid4().hex[:6]}"
    service = client.services.create(IMAGE, ["sleep", "600"], name=name, labels={TEST_LABEL: "1"},
                                     endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"))
    try:
        started = time.monotonic()
        seen.page.wait_for_function(f"() => document.querySelector('.topology-svg').textContent.includes('{name}')",
                                    timeout=20_000)
        assert time.monotonic() - started < 20
    finally:
        service.remove()
        client.close()
    wait_for(lambda: name not in requests.get(f"{server}/topology.dot", timeout=15).text, 30,
             message="the service gone from the topology")
    seen.assert_clean()
