"""The API reference (/api), error-code and search pages on the fake cluster: what they render is the JSON
answer of their URL (every operation of the OpenAPI document, every error code, every search hit)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from tests.unit.objects import SVC_WEB, TASK_WEB_1

if TYPE_CHECKING:
    from flask.testing import FlaskClient

    from tests.unit.support import Harness

HTML = {"Accept": "text/html"}
METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")


def _operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(method, path) for path, item in document["paths"].items() for method in item if method in METHODS]


def _op_id(method: str, path: str) -> str:
    return "op-" + method + path.replace("/", "-").replace("{", "").replace("}", "")


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_api_in_a_browser_is_the_reference_of_every_operation(shared_client: FlaskClient) -> None:
    document = shared_client.get("/api").get_json()
    operations = _operations(document)
    answer = shared_client.get("/api", headers=HTML)
    assert answer.status_code == 200 and answer.mimetype == "text/html"
    assert "Location" not in answer.headers          # no redirect to the overview
    assert answer.headers["Cache-Control"] == "no-cache"
    html = answer.get_data(as_text=True)
    assert html.count('<details class="op"') == len(operations) > 200
    ids = set(re.findall(r'<details class="op" id="([^"]+)"', html))
    assert ids == {_op_id(method, path) for method, path in operations}
    assert f'<span id="api-count" class="muted" role="status">{len(operations)} operations</span>' in html
    for tag in document["tags"]:
        assert f'id="tag-{tag["name"]}"' in html or not any(
            tag["name"] in (item[m].get("tags") or []) for item in document["paths"].values() for m in item
            if m in METHODS)
    # one operation in full: its parameters, request body media types, responses and schema links
    start = html.index(f'id="{_op_id("put", "/services/{id}/scale")}"')
    scale = html[start:html.index("</details>", start)]
    spec = document["paths"]["/services/{id}/scale"]["put"]
    for status in spec["responses"]:
        assert f'<th scope="row" class="s{status[:1]}">{status}</th>' in scale
    for media in spec["requestBody"]["content"]:
        assert f"<code>{media}</code>" in scale
    assert "<code>id</code>" in scale                          # the path-level parameter
    assert '<a href="#schema-ServiceWriteDetailV1">' in scale
    # the JSON answer is untouched: the reference's caching rule still holds for API clients
    assert shared_client.get("/api").headers["Cache-Control"] == "public, max-age=3600"


def test_every_schema_link_has_its_anchor(shared_client: FlaskClient) -> None:
    document = shared_client.get("/api").get_json()
    html = shared_client.get("/api.html").get_data(as_text=True)
    anchors = set(re.findall(r'<details class="schema" id="schema-([^"]+)"', html))
    assert anchors == set(document["components"]["schemas"])
    linked = set(re.findall(r'href="#schema-([^"]+)"', html))
    assert linked and linked <= anchors


def test_api_filter_narrows_the_operations_on_the_server(shared_client: FlaskClient) -> None:
    document = shared_client.get("/api").get_json()
    html = shared_client.get("/api?q=PUT+scale", headers=HTML).get_data(as_text=True)
    ids = re.findall(r'<details class="op" id="([^"]+)"', html)
    assert ids == [_op_id("put", "/services/{id}/scale")]
    assert 'value="PUT scale"' in html and "1 operation<" in html
    nothing = shared_client.get("/api?q=zzzz-no-such", headers=HTML).get_data(as_text=True)
    assert '<details class="op"' not in nothing and "No operation matches" in nothing
    # the schemas stay whatever the filter
    assert nothing.count('<details class="schema"') == len(document["components"]["schemas"])


def test_api_reference_render_time_is_bounded(shared_client: FlaskClient) -> None:
    """The whole reference (~1 MB of HTML) is one request on the hub: measured, and bounded generously
    (CPU time, so a busy machine does not fail it; ~80 ms measured on the 2-vCPU dev box)."""
    shared_client.get("/api", headers=HTML)                    # the document is built once per process
    spent = []
    for _ in range(3):
        started = time.process_time()
        assert shared_client.get("/api", headers=HTML).status_code == 200
        spent.append(time.process_time() - started)
    assert min(spent) < 0.4, spent


def test_error_code_pages(shared_client: FlaskClient) -> None:
    codes = shared_client.get("/api/errors").get_json()
    html = shared_client.get("/api/errors", headers=HTML).get_data(as_text=True)
    rows = re.findall(r'<tr id="([A-Z]+[0-9]+)">', html)
    assert rows == [item["code"] for item in codes["items"]] and len(rows) == codes["total"]
    assert '<a href="/api/errors/FLT001"><code>FLT001</code></a>' in html
    assert 'id="domain-FLT"' in html and 'href="#domain-FLT"' in html

    one = shared_client.get("/api/errors/FLT001").get_json()
    page = shared_client.get("/api/errors/FLT001", headers=HTML)
    assert page.status_code == 200
    text = _text(page.get_data(as_text=True))
    for value in (one["title"], one["description"], one["suggestion"], str(one["status"])):
        assert value in text
    missing = shared_client.get("/api/errors/NOPE999", headers=HTML)
    assert missing.status_code == 404 and "There is no such error code" in missing.get_data(as_text=True)


def test_search_page_groups_the_hits_by_kind(shared_client: FlaskClient) -> None:
    answer = shared_client.get("/search?q=shop_web&limit=1").get_json()
    page = shared_client.get("/search?q=shop_web&limit=1", headers=HTML)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    kinds = re.findall(r'<h2 id="hits-([a-z]+)">', html)
    assert kinds == list(answer["results"]) and "services" in kinds and "tasks" in kinds
    assert f'<a href="/services/{SVC_WEB}">shop_web_api</a>' in html
    assert f'<a href="/tasks/{TASK_WEB_1}">shop_web_api.1</a>' in html
    assert "<td>prefix</td>" in html                          # how it matched
    assert '<span class="state state-running">running</span>' in html
    # a kind with more matches than shown says so and links to more
    assert f"1 of {answer['counts']['tasks']} shown" in html
    assert 'href="/search?q=shop_web&amp;limit=10"' in html
    assert '<option selected>3</option>' not in html and '<select id="search-limit"' in html
    # the form works without script: a GET to /search with q
    assert '<form class="filter search-page" method="get" action="/search"' in html
    assert 'value="shop_web"' in html
    assert 'href="/search.atom?q=shop_web"' in html            # this query's feed, not the global one


def test_search_page_without_a_query_and_with_a_bad_one(shared_client: FlaskClient) -> None:
    empty = shared_client.get("/search", headers=HTML)
    html = empty.get_data(as_text=True)
    assert empty.status_code == 400 and 'role="alert"' not in html and "Type a name" in html
    assert "data-stream" not in html                           # nothing to keep live
    long = shared_client.get("/search?q=" + "x" * 201, headers=HTML)
    assert long.status_code == 400 and "SEA002" in long.get_data(as_text=True)
    none = shared_client.get("/search?q=zzzz-nothing", headers=HTML).get_data(as_text=True)
    assert "Nothing matches" in none and "<table" not in none


def test_search_results_refresh_as_a_fragment(shared_client: FlaskClient) -> None:
    page = shared_client.get("/search?q=shop", headers=HTML).get_data(as_text=True)
    assert 'data-stream="/events?types=' in page
    fragment = shared_client.get("/search?q=shop", headers={**HTML, "Shoal-Fragment": "results"})
    body = fragment.get_data(as_text=True)
    assert body.startswith('<template data-block="results">') and "<header" not in body
    assert f'href="/services/{SVC_WEB}"' in body


def test_search_page_before_the_first_sync(unsynced: Harness) -> None:
    page = unsynced.app.test_client().get("/search?q=shop", headers=HTML)
    assert page.status_code == 503 and "ENG001" in page.get_data(as_text=True)
