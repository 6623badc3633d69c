"""The history pages (/history, /history/<id>, /events in a browser) and the object_history macro, on the
fake engine: rows and links from the real /history answer, filters as the API's parameters, cursor paging,
field diffs old → new, who made a change through the API (REST and MCP), live blocks as fragments."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import g, render_template_string
from flask.testing import FlaskClient

from app.auth.identity import Identity
from app.resources import ResourceKind
from tests.unit import objects
from tests.unit.mcp.tools_support import ACL_SETTINGS, agent, call, running
from tests.unit.objects import SVC_DB, SVC_WEB
from tests.unit.support import Harness, wait_until

HTML = {"Accept": "text/html"}
OPS = {"X-User": "ops"}


def html(client: FlaskClient, url: str, **headers: str) -> tuple[int, str]:
    response = client.get(url, headers={**HTML, **headers})
    assert response.mimetype == "text/html"
    return response.status_code, response.get_data(as_text=True)


def rows(body: str) -> list[str]:
    """The rows of the history table (one string per <tr data-seq>)."""
    return re.findall(r'<tr data-seq="\d+">.*?</tr>', body, re.S)


def history_json(client: FlaskClient, query: str = "", **headers: str) -> dict[str, Any]:
    response = client.get("/history" + query, headers={"Accept": "application/json", **headers})
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


@pytest.fixture
def written() -> Iterator[tuple[Harness, FlaskClient]]:
    """An app at operations level 1 with header identities (``X-User``), after ``ops`` scaled shop_web_api
    from 2 to 4 replicas through the REST API."""
    with running(operations_level=1, **ACL_SETTINGS) as (harness, _writer):
        client = harness.app.test_client()
        scaled = client.put(f"/services/{SVC_WEB}/scale", json={"replicas": 4}, headers=OPS)
        assert scaled.status_code == 200, scaled.get_data(as_text=True)
        yield harness, client


# --------------------------------------------------------------------------- /history
def test_history_page_lists_the_records_of_the_json_answer(client: FlaskClient) -> None:
    status, body = html(client, "/history")
    assert status == 200
    items = history_json(client)["items"]
    shown = rows(body)
    assert len(shown) == len(items) > 5
    for item, row in zip(items, shown, strict=True):
        assert f'data-seq="{item["id"]}"' in row
        assert f'href="{item["@id"]}"' in row and f'datetime="{item["timestamp"]}"' in row
        assert f'action-{item["action"]}' in row
    # kind + object linked, and the summary of the first service record
    service = next(item for item in items if item["type"] == "service")
    assert f'<a href="{service["resource"]}">{service["name"]}</a>' in body
    assert service["summary"] in body
    # live: the table is a block, the page follows the global stream
    assert '<div data-block="changes" data-history>' in body and 'data-stream="/events"' in body
    assert '<p class="visually-hidden" role="status" data-history-status></p>' in body   # history.js says "N new"
    assert "outside Shoal" in body   # first-sync records have no audit


def test_history_filters_are_the_api_parameters(client: FlaskClient) -> None:
    status, body = html(client, "/history?type=service")
    assert status == 200
    shown = rows(body)
    assert shown and all('<span class="kind">service</span>' in row for row in shown)
    assert 'data-stream="/events?types=service"' in body   # the stream narrowed to the kind
    assert '<a href="/history?type=service" aria-current="true">service</a>' in body
    # action toggles: each link is the current set with one action flipped; none is ever empty
    assert 'href="/history?type=service&amp;action=update%2Cremove"' in body            # hide create
    assert 'href="/history?type=service&amp;action=create%2Cupdate%2Cremove%2Cref_changed"' in body
    _, only = html(client, "/history?action=remove")
    actions = only.split('facet-name">Actions')[1].split("</p>")[0]
    assert "(shown; the only action left)" in actions                       # remove: not a link
    assert re.findall(r'href="/history\?action=([^"]+)"', actions) == [
        "create%2Cremove", "update%2Cremove", "remove%2Cref_changed"]
    # one object: the form sends resourceId only when filled (required), keeping the other filters
    _, one = html(client, f"/history?type=service&resourceId={SVC_DB}")
    assert rows(one) and all(f"/services/{SVC_DB}" in row for row in rows(one))
    assert 'name="resourceId" value="' + SVC_DB + '" required' in one
    assert '<input type="hidden" name="type" value="service">' in one


def test_a_bad_filter_is_the_api_problem_beside_the_filters(client: FlaskClient) -> None:
    status, body = html(client, "/history?type=bogus")
    assert status == 400
    assert "API012" in body and 'role="alert"' in body and "type must be one of" in body
    assert 'class="history-filters' in body and not rows(body)


def test_paging_follows_the_cursor(client: FlaskClient) -> None:
    everything = [item["id"] for item in history_json(client, "?limit=200")["items"]]
    _, first = html(client, "/history?limit=3")
    first_ids = [int(seq) for seq in re.findall(r'<tr data-seq="(\d+)"', first)]
    assert first_ids == everything[:3]
    older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', first)
    assert older is not None and "rel=\"first\"" not in first
    _, second = html(client, older.group(1).replace("&amp;", "&"))
    assert [int(seq) for seq in re.findall(r'<tr data-seq="(\d+)"', second)] == everything[3:6]
    assert '<a href="/history?limit=3" rel="first">Newest</a>' in second


def test_the_changes_block_refreshes_alone_with_a_new_record(harness: Harness) -> None:
    client = harness.app.test_client()
    before = client.get("/history", headers={**HTML, "Shoal-Fragment": "changes"}).get_data(as_text=True)
    assert before.startswith('<template data-block="changes">') and "<html" not in before
    raw = copy.deepcopy(harness.engine.objects[ResourceKind.SERVICE][SVC_DB])
    raw["Spec"].setdefault("Labels", {})["tier"] = "gold"
    raw["Version"] = {"Index": raw["Version"]["Index"] + 1}
    harness.engine.objects[ResourceKind.SERVICE][SVC_DB] = raw
    harness.engine.emit("service", "update", SVC_DB)
    wait_until(lambda: history_json(client, "?limit=1")["items"][0]["action"] == "update", message="the update")
    after = client.get("/history", headers={**HTML, "Shoal-Fragment": "changes"}).get_data(as_text=True)
    newest = rows(after)[0]
    assert "label tier" in newest and "outside Shoal" in newest and newest not in before


# --------------------------------------------------------------------------- who made it
def test_a_write_through_the_api_shows_who_made_it(written: tuple[Harness, FlaskClient]) -> None:
    _, client = written
    entry = history_json(client, f"?type=service&resourceId={SVC_WEB}", **OPS)["items"][0]
    assert entry["audit"]["identity"] == "ops"
    _, body = html(client, "/history?type=service", **OPS)
    row = rows(body)[0]
    assert f'data-seq="{entry["id"]}"' in row
    assert '<span class="who-made">ops</span>' in row and "via REST" in row and "replicas 2→4" in row

    status, page = html(client, entry["@id"], **OPS)
    assert status == 200
    audit = page.split('id="audit-head"')[1].split("</section>")[0]
    assert "<dd>ops</dd>" in audit and "REST API" in audit
    assert f'<code>{entry["audit"]["requestId"]}</code>' in audit


def test_the_record_page_shows_each_field_old_and_new(written: tuple[Harness, FlaskClient]) -> None:
    _, client = written
    entry = history_json(client, f"?type=service&resourceId={SVC_WEB}", **OPS)["items"][0]
    _, page = html(client, entry["@id"], **OPS)
    diff = page.split('<table class="list diff">')[1].split("</table>")[0]
    row = re.search(r"<tr>\s*<th scope=\"row\"><code>Spec.Mode.Replicated.Replicas</code></th>(.*?)</tr>", diff, re.S)
    assert row is not None
    assert '<td class="old"><code>2</code></td>' in row.group(1)
    assert '<td class="new"><code>4</code></td>' in row.group(1)
    assert "<h1>Service shop_web_api: update</h1>" in page
    assert f'<a href="/services/{SVC_WEB}">shop_web_api</a>' in page
    # around it: the object's previous change (its create) and the global older one resolve
    previous = re.search(r'<a href="(/history/\d+)">Previous change of this service</a>', page)
    older = re.search(r'<a href="(/history/\d+)" rel="prev">Older change</a>', page)
    assert previous is not None and older is not None
    status, created = html(client, previous.group(1), **OPS)
    assert status == 200 and "shop_web_api: create" in created and "What changed" not in created
    newer = re.search(r'<a href="(/history/\d+)" rel="next">Newer change</a>', created)
    assert newer is not None and int(newer.group(1).rsplit("/", 1)[1]) > int(previous.group(1).rsplit("/", 1)[1])


def test_an_agent_write_says_via_mcp_and_its_tool() -> None:
    with running(operations_level=3, **ACL_SETTINGS) as (harness, _writer):
        with agent(harness, "ops", client="agent-7"):
            assert call("restart_service", {"id": "shop_web_api"}, user="ops")["isError"] is False
        client = harness.app.test_client()
        _, body = html(client, f"/history?type=service&resourceId={SVC_WEB}", **OPS)
        row = rows(body)[0]
        assert '<span class="who-made">ops</span>' in row
        assert "via MCP · restart_service · client agent-7" in row


def test_diff_values_absent_text_and_structures(app: Any) -> None:
    changes = [{"field": "Spec.Labels[\"a\"]", "new": "x<y"}, {"field": "Spec.Env[\"B\"]", "old": "1"},
               {"field": "Spec.Ports", "old": [{"Port": 80}], "new": None}, {"field": "Spec.Name", "old": ""}]
    template = ('{% import "macros/history.html" as hist with context %}'
                '{% for c in changes %}[{{ hist.diff_value(c, "old") }}|{{ hist.diff_value(c, "new") }}]{% endfor %}')
    with app.test_request_context("/"):
        out = render_template_string(template, changes=changes)
    parts = re.findall(r"\[(.*?)\|(.*?)\]", out, re.S)
    assert parts[0] == ('<span class="absent muted">(absent)</span>', "<code>x&lt;y</code>")
    assert parts[1] == ("<code>1</code>", '<span class="absent muted">(absent)</span>')
    assert parts[2][0].startswith('<pre class="json">') and "&#34;Port&#34;: 80" in parts[2][0]
    assert parts[2][1] == "<code>null</code>"
    assert parts[3][0] == '<code class="muted">""</code>'


def test_a_record_that_is_not_kept_is_a_404_page(client: FlaskClient) -> None:
    status, body = html(client, "/history/1")
    assert status == 404 and 'role="alert"' in body and "No history entry 1" in body


# --------------------------------------------------------------------------- object_history, /events
def test_object_history_macro_lists_one_objects_changes(written: tuple[Harness, FlaskClient]) -> None:
    harness, _ = written
    template = ('{% import "macros/history.html" as hist with context %}'
                '{{ hist.object_history("service", sid, limit=5) }}')
    with harness.app.test_request_context("/", headers=OPS):
        g.identity = Identity("ops", "ops", "headers")
        out = render_template_string(template, sid=SVC_WEB)
    shown = rows(out)
    assert len(shown) == 2   # the first sync's create and the scale
    assert "replicas 2→4" in shown[0] and '<span class="who-made">ops</span>' in shown[0]
    assert "created" in shown[1] and 'scope="col">Object<' not in out   # compact: no object column
    assert f'href="/history?type=service&amp;resourceId={SVC_WEB}">All changes of this service</a>' in out


def test_object_history_shows_the_answer_problem(app: Any) -> None:
    with app.test_request_context("/"):
        out = render_template_string('{% import "macros/history.html" as hist with context %}'
                                     '{{ hist.object_history("bogus", "x") }}')
    assert 'role="alert"' in out and "API012" in out and "<table" not in out


def test_events_page_is_a_live_log_of_the_latest_records(client: FlaskClient) -> None:
    _, body = html(client, "/events")
    assert "API002" not in body and '<div data-block="log" data-history>' in body and 'data-stream="/events"' in body
    items = history_json(client)["items"]
    logged = re.findall(r'<li data-seq="(\d+)">', body)
    assert [int(seq) for seq in logged] == [item["id"] for item in items]
    fragment = client.get("/events", headers={**HTML, "Shoal-Fragment": "log"}).get_data(as_text=True)
    assert fragment.startswith('<template data-block="log">')
    assert re.findall(r'<li data-seq="(\d+)">', fragment) == logged
    _, related = html(client, "/events?action=create,update,remove,ref_changed")
    assert "Hide related changes" in related


def test_a_50_row_history_page_renders_within_budget(harness: Harness) -> None:
    client = harness.app.test_client()
    for n in range(30):   # configs created on the engine (as with the CLI): 50+ records in all
        config_id = f"cfgbudget{n:016d}"
        harness.engine.objects[ResourceKind.CONFIG][config_id] = objects.config(config_id, f"budget_{n}")
        harness.engine.emit("config", "create", config_id)
    wait_until(lambda: len(history_json(client, "?limit=50")["items"]) == 50, message="50 records")
    timings = []
    for _ in range(9):
        started = time.process_time()   # CPU time: other work on a shared machine does not count
        status, body = html(client, "/history?limit=50")
        timings.append(time.process_time() - started)
        assert status == 200 and len(rows(body)) == 50
    assert sorted(timings)[4] < 0.015   # the median within the 15 ms budget (test client included)
