"""The topology drawings (the real ``dot`` binary: SVG made inline-safe, cache by DOT hash, bounded, the
timeout and missing-binary paths) and the metrics and topology pages on the fake cluster: the SVG links
to the objects' pages, the tables beside it, the fragments, the legacy views, and the metrics pages with
Prometheus off and with a fake Prometheus (default charts over one query, a query's table, problems)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.dashboard.topology_svg import (
    EXTENSION_KEY,
    MAX_NODES,
    SvgCache,
    draw,
    init_topology_svg,
    inline_svg,
    layout,
)
from tests.fakes import FakeEngine
from tests.unit.metrics.fake_upstream import FakePrometheus, json_answer
from tests.unit.objects import HOSTNAMES, NODE_MANAGER, SERVICE_NAMES, SVC_DB, SVC_WEB
from tests.unit.support import build_harness

HTML = {"Accept": "text/html"}
SMALL = b'graph "g" { node [shape=box]; "a" [label="alpha"]; "b" [label="beta"]; "a" -- "b"; }\n'


def page(client: FlaskClient, url: str, status: int = 200, headers: dict[str, str] | None = None) -> str:
    response = client.get(url, headers={**HTML, **(headers or {})})
    assert response.status_code == status, response.get_data(as_text=True)[:2000]
    return response.get_data(as_text=True)


@pytest.fixture
def drawn(app: Flask) -> Flask:
    """The app with the drawings wired (what init_dashboard does once the coordinator wires it)."""
    init_topology_svg(app)
    return app


# ------------------------------------------------------------------------------------------------ drawings
def test_dot_draws_an_inline_safe_svg() -> None:
    drawing = layout(SMALL)
    assert drawing.error is None and drawing.svg is not None
    svg = str(drawing.svg)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<!--" not in svg
    assert "style=" not in svg
    assert ">alpha<" in svg and ">beta<" in svg
    assert 'role="group"' in svg.split(">", 1)[0]


def test_names_are_escaped_in_the_svg() -> None:
    """Labels come from object names: Graphviz escapes them, so the inlined SVG carries no markup of theirs."""
    body = {"id": "network", "nodes": {"urn:service:service:x": {"label": '<script>alert("x")</script>&'}}}
    drawing = draw(body, "", SvgCache())
    svg = str(drawing.svg)
    assert "<script" not in svg and "&lt;script&gt;" in svg


def test_inline_svg_removes_styles_prolog_and_urn_titles() -> None:
    raw = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<!-- made by dot -->\n<svg width="1pt"><style>g{}</style>'
           '<g class="node" style="fill:red"><title>urn:service:service:x</title><text style=\'a\'>x</text></g></svg>')
    svg = inline_svg(raw)
    assert svg.startswith("<svg ") and "style" not in svg and "urn:" not in svg and "<!--" not in svg
    assert "<text>x</text>" in svg


def test_the_same_dot_is_laid_out_once() -> None:
    cache = SvgCache()
    first = cache.get(SMALL)
    again = cache.get(SMALL)
    assert again is first and cache.runs == 1
    other = cache.get(SMALL.replace(b"beta", b"gamma"))
    assert cache.runs == 2 and ">gamma<" in str(other.svg)


def test_the_cache_is_bounded() -> None:
    cache = SvgCache(size=2)
    for name in ("one", "two", "three"):
        cache.get(SMALL.replace(b"beta", name.encode()))
    assert len(cache.entries) == 2
    cache.get(SMALL.replace(b"beta", b"one"))      # evicted first: laid out again
    assert cache.runs == 4


def test_a_slow_layout_is_cut_at_the_timeout() -> None:
    cache = SvgCache(command=("sleep", "10"), timeout=0.3)
    started = time.monotonic()
    drawing = cache.get(SMALL)
    assert time.monotonic() - started < 3
    assert drawing.svg is None and drawing.error == "timeout" and "0.3 s" in drawing.detail
    assert cache.get(SMALL) is drawing and cache.runs == 1    # remembered for this DOT: no 5 s per refresh


def test_a_missing_dot_is_said_and_not_remembered() -> None:
    cache = SvgCache(command=("/nonexistent/bin/dot", "-Tsvg"))
    drawing = cache.get(SMALL)
    assert drawing.error == "missing" and "not installed" in drawing.detail
    assert not cache.entries


def test_invalid_dot_fails_with_graphviz_message() -> None:
    drawing = layout(b"graph { this is not dot")
    assert drawing.svg is None and drawing.error == "failed" and "Graphviz failed" in drawing.detail


def test_a_graph_too_large_is_not_drawn() -> None:
    body = {"id": "network", "nodes": {f"urn:service:service:{i}": {"label": f"s{i}"} for i in range(MAX_NODES + 1)}}
    cache = SvgCache()
    drawing = draw(body, "", cache)
    assert drawing.error == "too_large" and cache.runs == 0


# ------------------------------------------------------------------------------------------------ topology pages
def test_topology_page_inlines_the_logical_graph_linked_to_services(client: FlaskClient, drawn: Flask) -> None:
    text = page(client, "/topology")
    svg = text.split('class="topology-svg"', 1)[1].split("</svg>", 1)[0]
    for name in SERVICE_NAMES.values():
        assert f">{name}<" in svg
    assert f'xlink:href="/services/{SVC_WEB}"' in svg and f'xlink:href="/services/{SVC_DB}"' in svg
    assert ">shop<" in svg                         # the stack's cluster box
    assert "style=" not in svg
    assert 'data-stream="/events?types=node,service,network"' in text
    assert 'aria-current="page">Services and networks' in text
    # The table alternative: every service, and the network that joins two of them.
    assert text.count('<th scope="row"><a href="/services/') == len(SERVICE_NAMES)
    assert ">shop_default</a>" in text


def test_placement_tab_draws_nodes_and_tasks(client: FlaskClient, drawn: Flask) -> None:
    text = page(client, "/topology?view=placement")
    svg = text.split('class="topology-svg"', 1)[1].split("</svg>", 1)[0]
    for hostname in HOSTNAMES.values():
        assert hostname.replace("-", "&#45;") in svg
    assert f'xlink:href="/nodes/{NODE_MANAGER}"' in svg
    assert "1 running" in svg
    assert 'data-stream="/events?types=node,service,network,task"' in text
    assert 'aria-current="page">Placement on nodes' in text


def test_drawings_are_cached_across_page_views(client: FlaskClient, drawn: Flask) -> None:
    page(client, "/topology")
    cache: SvgCache = drawn.extensions[EXTENSION_KEY]
    runs = cache.runs
    page(client, "/topology")
    assert cache.runs == runs == 1


def test_graph_fragment_carries_the_svg(client: FlaskClient, drawn: Flask) -> None:
    text = page(client, "/topology", headers={"Shoal-Fragment": "graph"})
    assert text.startswith('<template data-block="graph">') and "<svg" in text and "<html" not in text


def test_without_dot_the_page_says_so_and_shows_tables(client: FlaskClient, drawn: Flask) -> None:
    drawn.extensions[EXTENSION_KEY] = SvgCache(command=("/nonexistent/bin/dot",))
    text = page(client, "/topology")
    assert "<svg" not in text and "Graphviz (the dot program) is not installed" in text
    assert "<details class=\"panel\" open>" in text
    assert text.count('<th scope="row"><a href="/services/') == len(SERVICE_NAMES)


def test_without_the_drawing_helper_the_page_still_reads(client: FlaskClient, app: Flask) -> None:
    app.jinja_env.globals.pop("topology_svg", None)
    text = page(client, "/topology")
    assert "SVG rendering is not enabled" in text and "<svg" not in text
    assert text.count('<th scope="row"><a href="/services/') == len(SERVICE_NAMES)


def test_legacy_views_are_tables_pointing_to_the_topology(client: FlaskClient) -> None:
    networks = page(client, "/topology/networks")
    assert 'href="/topology">topology</a>' in networks and ">shop_default</a>" in networks
    assert f'href="/services/{SVC_WEB}">shop_web_api</a>' in networks
    placement = page(client, "/topology/placement")
    assert 'href="/topology?view=placement"' in placement
    assert f'href="/nodes/{NODE_MANAGER}">manager-1</a>' in placement
    assert "shop_web_api.1</a>" in placement


# ------------------------------------------------------------------------------------------------ metrics pages
def test_metrics_off_is_said_plainly(client: FlaskClient) -> None:
    for url, status in (("/metrics", 400), ("/metrics?query=up", 503), ("/cluster/metrics", 503),
                        ("/metrics/status", 200)):
        text = page(client, url, status)
        assert "no Prometheus is configured" in text and "SERVICE_PROMETHEUS_URL" in text, url
        assert "data-chart" not in text and "data-stream" not in text, url
    assert "MTR001" in page(client, "/cluster/metrics", 503)


VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"chart": "mem_node", "nodename": "host-a"}, "value": [1795000000.0, "1073741824"]},
    {"metric": {"chart": "cpu_node", "nodename": "host-a"}, "value": [1795000000.0, "0.25"]},
    {"metric": {"__name__": "up", "job": "prometheus"}, "value": [1795000000.0, "1"]}]}}
MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"__name__": "up", "job": "node"}, "values": [[1795000000.0, "1"], [1795000015.0, "0"]]}]}}


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        fake.routes["/api/v1/query"] = json_answer(VECTOR)
        fake.routes["/api/v1/query_range"] = json_answer(MATRIX)
        fake.routes["/api/v1/label/__name__/values"] = json_answer({"status": "success", "data": ["up", "x"]})
        yield fake


@pytest.fixture
def prom_client(fake_engine: FakeEngine, prom: FakePrometheus) -> Iterator[FlaskClient]:
    harness = build_harness(fake_engine, prometheus_url=prom.url)
    harness.start()
    yield harness.app.test_client()
    harness.stop()


def test_default_charts_share_one_query_and_render_the_current_values(prom_client: FlaskClient,
                                                                       prom: FakePrometheus) -> None:
    text = page(prom_client, "/metrics", 400)     # the API's MTR003 (no query), shown as the default charts
    assert text.count("data-chart=") == 4 and "data-stream" not in text
    holder = text.split("data-metrics=", 1)[1].split(">", 1)[0]
    assert holder.count("label_replace(") == 4 and " or " in holder and 'data-live="true"' in holder
    mem = text.split('data-chart="mem_node"', 1)[1].split("</figure>", 1)[0]
    assert "host-a" in mem and "1.0 GiB" in mem
    cpu = text.split('data-chart="cpu_node"', 1)[1].split("</figure>", 1)[0]
    assert "0.250" in cpu
    assert "uPlot.min.css" in text
    queries = [q for path, q in prom.requests if path == "/api/v1/query" and "label_replace" in q]
    assert len(queries) == 1                         # one instant query for all four snapshot tables


def test_a_query_page_tabulates_and_charts_live(prom_client: FlaskClient) -> None:
    text = page(prom_client, "/metrics?query=up&step=5")
    assert 'data-query="up"' in text and 'data-step="5"' in text and 'data-live="true"' in text
    assert 'job="prometheus"' in text and "metrics-initial" not in text


def test_a_range_query_embeds_its_answer_for_the_chart(prom_client: FlaskClient) -> None:
    text = page(prom_client, "/metrics?query=up&start=1795000000&end=1795000015&step=15")
    assert 'data-live="false"' in text
    block = text.split('<script type="application/json" id="metrics-initial">', 1)[1].split("</script>", 1)[0]
    assert json.loads(block) == MATRIX


def test_an_upstream_problem_is_shown_with_the_form(prom_client: FlaskClient, prom: FakePrometheus) -> None:
    prom.routes["/api/v1/query"] = json_answer({"status": "error", "errorType": "bad_data",
                                                "error": "parse error: unexpected end"}, "400 Bad Request")
    text = page(prom_client, "/metrics?query=sum((", 502)
    assert "MTR002" in text and "parse error" in text and 'aria-invalid="true"' in text


def test_label_values_link_metric_names_to_queries(prom_client: FlaskClient) -> None:
    text = page(prom_client, "/metrics/labels/__name__")
    assert 'href="/metrics?query=up"' in text


