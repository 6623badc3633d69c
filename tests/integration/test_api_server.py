"""The read API as clients see it: gunicorn + gevent worker on 127.0.0.1, following the lab swarm."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from openapi_spec_validator import validate

from app.resources import ResourceKind
from tests.conftest import wait_for

pytestmark = pytest.mark.integration
LAB_FILES = Path(__file__).resolve().parents[2] / "scripts" / "lab"


@pytest.fixture(scope="module")
def http(server: str) -> requests.Session:
    session = requests.Session()
    session.headers["Accept"] = "application/json"
    return session


def get(http: requests.Session, server: str, path: str, **kwargs: object) -> requests.Response:
    return http.get(server + path, timeout=10, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(ResourceKind), ids=lambda k: k.value)
def test_every_collection_and_one_detail_of_each_kind(http, server, kind) -> None:
    listing = get(http, server, kind.spec.path)
    assert listing.status_code == 200
    body = listing.json()
    assert body["@type"] == "Collection" and body["@context"] == "/api/context.jsonld"
    assert body["total"] >= 1 and body["items"], f"the lab has no {kind.spec.plural}"
    item = body["items"][0]
    assert item["@type"] == kind.spec.jsonld_type and item["@id"].startswith(kind.spec.path + "/")
    detail = get(http, server, item["@id"])
    assert detail.status_code == 200
    assert detail.json()["@id"] == item["@id"]
    assert kind.spec.detail_key in detail.json()
    assert detail.headers["Vary"] == "Accept"
    assert "rel=\"service-desc\"" in detail.headers["Link"]


def test_two_stacks_with_members_and_cross_references(http, server) -> None:
    stacks = {s["name"]: s for s in get(http, server, "/stacks").json()["items"]}
    assert {"demo", "ops"} <= set(stacks)
    demo = get(http, server, "/stacks/demo").json()["stack"]
    assert {s["Spec"]["Name"] for s in demo["services"]} >= {"demo_web", "demo_api"}
    assert demo["configs"] and demo["secrets"] and demo["networks"] and demo["volumes"]
    config_id = demo["configs"][0]["ID"]
    users = get(http, server, f"/configs/{config_id}").json()["services"]
    assert {u["name"] for u in users} >= {"demo_web"}
    volume = demo["volumes"][0]["Name"]
    assert get(http, server, f"/volumes/{volume}").json()["services"]


def test_task_detail_names_its_service_and_node(http, server) -> None:
    running = get(http, server, "/tasks?filter=" + quote('state == "running"')).json()["items"]
    assert running and all(t["Status"]["State"] == "running" for t in running)
    task = running[0]
    assert task["ServiceName"] and task["NodeHostname"]
    detail = get(http, server, task["@id"]).json()
    assert detail["service"]["id"] == task["ServiceID"] and detail["service"]["name"] == task["ServiceName"]
    assert detail["node"]["hostname"] == task["NodeHostname"]
    node_tasks = get(http, server, f"/nodes/{task['NodeID']}/tasks").json()
    assert task["ID"] in {t["ID"] for t in node_tasks["items"]}
    assert node_tasks["total"] == node_tasks["limit"] == len(node_tasks["items"])


def test_failed_tasks_of_the_crashing_service_are_filterable(http, server) -> None:
    expression = 'state == "failed" && exit_code != 0'
    failed = get(http, server, "/tasks?filter=" + quote(expression)).json()
    assert failed["total"] >= 1
    assert all(t["Status"]["State"] == "failed" for t in failed["items"])


def test_secret_payloads_never_appear(http, server) -> None:
    values = [p.read_text().strip() for p in LAB_FILES.glob("*") if "secret" in p.name or "token" in p.name]
    assert values
    secrets = get(http, server, "/secrets").json()["items"]
    bodies = [get(http, server, "/secrets").text] + [get(http, server, s["@id"]).text for s in secrets]
    bodies.append(get(http, server, "/stacks/demo").text)
    for value in values:
        encoded = base64.b64encode(value.encode()).decode()
        for body in bodies:
            assert value not in body and encoded not in body
    assert all("Data" not in s["Spec"] for s in secrets)


def test_search_sort_and_paging(http, server) -> None:
    found = get(http, server, "/services?search=DEMO").json()
    assert found["total"] >= 2 and all("demo" in s["Spec"]["Name"] for s in found["items"])
    names = [s["Spec"]["Name"] for s in get(http, server, "/services?sort=name&dir=desc&limit=200").json()["items"]]
    assert names == sorted(names, key=str.lower, reverse=True)
    page = get(http, server, "/services?limit=2&offset=1")
    assert len(page.json()["items"]) == 2 and 'rel="next"' in page.headers["Link"]
    partial = get(http, server, "/services", headers={"Range": "items 0-1"})
    assert partial.status_code == 206
    assert partial.headers["Content-Range"] == f"items 0-1/{page.json()['total']}"


def test_filter_errors_are_problems_with_codes(http, server) -> None:
    for expression, code in (('state == "running" &&', "FLT002"), ('colour == "red"', "FLT004"),
                             ("slot + 1", "FLT005"), ("x" * 513, "FLT001")):
        response = get(http, server, "/tasks?filter=" + quote(expression))
        assert response.status_code == 400
        assert response.headers["Content-Type"].startswith("application/problem+json")
        assert response.json()["type"] == f"/api/errors/{code}"


def test_conditional_requests_and_request_ids(http, server) -> None:
    first = get(http, server, "/nodes")
    etag = first.headers["ETag"]
    assert get(http, server, "/nodes", headers={"If-None-Match": etag}).status_code == 304
    node = first.json()["items"][0]["@id"]
    modified = get(http, server, node).headers["Last-Modified"]
    assert get(http, server, node, headers={"If-Modified-Since": modified}).status_code == 304
    echoed = get(http, server, "/nodes", headers={"Request-Id": "abc-123"})
    assert echoed.headers["Request-Id"] == "abc-123"
    assert len(get(http, server, "/nodes", headers={"Request-Id": "x" * 65}).headers["Request-Id"]) <= 64
    head = http.head(server + "/nodes", timeout=10)
    assert head.status_code == 200 and head.headers["ETag"] == etag and not head.content


def test_freshness_is_visible(http, server) -> None:
    # Earlier tests change the engine (services removed...), after which the watcher may reopen its
    # stream and say stale for a second or two: wait for live (bounded), then read both.
    def live() -> object:
        response = get(http, server, "/services")
        ready = get(http, server, "/-/ready")
        return (response.headers["Cache-Freshness"] == "live" and ready.status_code == 200) and (response, ready)

    found = wait_for(live, 15, interval=0.1, message="Cache-Freshness: live and /-/ready 200")
    assert isinstance(found, tuple)
    response, ready = found
    assert int(response.headers["Cache-Sequence"]) > 0
    assert response.headers["Engine-Last-Contact"].endswith("Z")
    assert ready.json()["status"] == "ready"


def test_self_metrics_report_cache_and_requests(http, server) -> None:
    text = get(http, server, "/-/metrics").text
    assert 'shoal_cache_objects{kind="task"}' in text
    assert "shoal_http_requests_total" in text and "shoal_engine_events_total" in text
    assert "Link" not in get(http, server, "/-/health").headers


def test_openapi_document_is_valid_and_static(http, server) -> None:
    response = get(http, server, "/api")
    assert response.headers["Cache-Control"] == "public, max-age=3600"
    validate(response.json())
    assert get(http, server, "/api/context.jsonld").headers["Cache-Control"] == "public, max-age=3600"


def test_html_shell_links_the_feed(server) -> None:
    page = requests.get(server + "/services", headers={"Accept": "text/html"}, timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert 'type="application/atom+xml"' in page.text
