"""The services, tasks and nodes pages on the synthetic cluster (Flask test client, fake engine): every
list and detail renders the cluster's data at 200, a filter error renders at its 400 with the position
marked, the column heads are sort links of the API's own ``sort``/``dir``, live blocks render alone as
fragments, and a caller restricted by the ACL sees only what the API shows them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

HTML = {"Accept": "text/html"}


def page(client: FlaskClient, url: str, status: int = 200, headers: dict[str, str] | None = None) -> str:
    answer = client.get(url, headers={**HTML, **(headers or {})})
    text = answer.get_data(as_text=True)
    assert answer.status_code == status, (url, answer.status_code, text[-800:])
    assert answer.mimetype == "text/html"
    return text


def main(text: str) -> str:
    """The page's <main> (the navigation names every kind, so assertions look below it)."""
    return text.split('<main', 1)[1]


def body_rows(text: str) -> list[str]:
    """The rows of the live <tbody data-block="rows">."""
    tbody = text.split('<tbody data-block="rows">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr[ >].*?</tr>", tbody, flags=re.S)


# ------------------------------------------------------------------------------------------------ lists
def test_services_list_shows_every_service_with_replicas_stack_and_image(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, "/services"))
    rows = body_rows(text)
    assert len(rows) == 3
    web = next(row for row in rows if o.SVC_WEB in row)
    assert f'href="/services/{o.SVC_WEB}">shop_web_api</a>' in web
    assert 'href="/stacks/shop">shop</a>' in web
    assert re.search(r'<meter [^>]*max="2"[^>]*value="2"', web) and "2/2" in web
    assert ">nginx:1.25<" in web and "replicated" in web
    monitor = next(row for row in rows if o.SVC_MONITOR in row)
    assert "global" in monitor and "<meter" not in monitor   # no desired count for a global service
    assert "3 services" in text


def test_tasks_list_shows_state_desired_error_node_and_service(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, "/tasks"))
    rows = body_rows(text)
    assert len(rows) == 7
    old = next(row for row in rows if o.TASK_DB_OLD in row)
    assert 'class="state state-failed">failed<' in old and "→ shutdown" in old
    assert "non-zero exit (137)" in old
    assert f'href="/nodes/{o.NODE_DOWN}">worker-2</a>' in old
    assert f'href="/services/{o.SVC_DB}">shop_db</a>' in old
    pending = next(row for row in rows if o.TASK_MON_WORKER in row)
    assert "state-pending" in pending and "→ running" in pending


def test_nodes_list_shows_role_leader_state_and_resources(shared_client: FlaskClient) -> None:
    rows = body_rows(main(page(shared_client, "/nodes")))
    assert len(rows) == 3
    manager = next(row for row in rows if o.NODE_MANAGER in row)
    assert ">manager-1</a>" in manager and "state-leader" in manager and "manager" in manager
    assert "20.10.24" in manager and "8.0 GiB" in manager and ">4<" in manager and "10.0.0.27" in manager
    worker = next(row for row in rows if o.NODE_WORKER in row)
    assert "state-leader" not in worker


def test_nested_task_lists_follow_their_owner_and_stream_its_url(shared_client: FlaskClient) -> None:
    text = page(shared_client, f"/services/{o.SVC_WEB}/tasks")
    assert f'data-stream="/services/{o.SVC_WEB}"' in text   # the nested URL does not stream itself
    rows = body_rows(main(text))
    assert {o.TASK_WEB_1, o.TASK_WEB_2} == {re.search(r'data-id="(\w+)"', r).group(1) for r in rows}  # type: ignore[union-attr]
    assert '<th scope="col"><a href="?sort=service' not in text   # no service column for one service
    text = page(shared_client, f"/nodes/{o.NODE_MANAGER}/tasks")
    assert f'data-stream="/nodes/{o.NODE_MANAGER}"' in text
    assert "?sort=node" not in text and len(body_rows(main(text))) == 2


def test_filter_narrows_like_the_api(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, '/services?filter=name.startsWith("shop")'))
    names = re.findall(r'<a href="/services/\w+">([^<]+)</a>', text)
    assert sorted(names) == ["shop_db", "shop_web_api"]
    assert "2 services matching the filter" in text
    assert 'value="name.startsWith(&#34;shop&#34;)"' in text   # the box keeps the expression


def test_filter_error_renders_at_400_with_the_position_marked(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, "/tasks?filter=state%20%3D%3D", status=400))
    assert "FLT002" in text and 'aria-invalid="true"' in text
    assert re.search(r'at position 8: <code class="expr">state ==<mark> </mark></code>', text)
    assert '<tbody data-block="rows">' not in text   # no table of nothing beside the problem


def test_column_heads_are_sort_links_of_the_api_parameters(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, "/services?limit=2&offset=1"))
    assert 'href="?limit=2&amp;sort=name&amp;dir=asc"' in text   # offset dropped: a new order starts at 1
    text = main(page(shared_client, "/services?sort=name&dir=asc"))
    assert 'aria-sort="ascending"' in text and 'href="?sort=name&amp;dir=desc"' in text
    ascending = re.findall(r'<a href="/services/\w+">([^<]+)</a>', text)
    text = main(page(shared_client, "/services?sort=name&dir=desc"))
    assert 'aria-sort="descending"' in text
    descending = re.findall(r'<a href="/services/\w+">([^<]+)</a>', text)
    assert ascending == sorted(ascending) and descending == ascending[::-1]
    for url, field in (("/tasks", "state"), ("/tasks", "node"), ("/nodes", "hostname"), ("/nodes", "status")):
        assert f'href="?sort={field}&amp;dir=asc"' in page(shared_client, url)


def test_paging_links_and_count(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, "/tasks?limit=3"))
    assert len(body_rows(text)) == 3 and "7 tasks" in text
    assert "1\N{EN DASH}3 of 7" in text and 'rel="next"' in text and "offset=3" in text


def test_live_blocks_render_alone_as_fragments(shared_client: FlaskClient) -> None:
    answer = shared_client.get("/tasks", headers={**HTML, "Shoal-Fragment": "count,rows,pager"})
    text = answer.get_data(as_text=True)
    assert answer.status_code == 200 and text.startswith('<template data-block="count">7 tasks</template>')
    assert text.count("<tr ") == 7 and "<html" not in text
    for url, blocks in ((f"/services/{o.SVC_WEB}", "summary,facts,tasks,history"),
                        (f"/nodes/{o.NODE_MANAGER}", "summary,facts,tasks,history"),
                        (f"/tasks/{o.TASK_DB_OLD}", "summary,facts,history")):
        text = shared_client.get(url, headers={**HTML, "Shoal-Fragment": blocks}).get_data(as_text=True)
        assert text.count("<template data-block=") == blocks.count(",") + 1
        assert "<template data-block=\"summary\"></template>" not in text, url


# ---------------------------------------------------------------------------------------------- details
def test_service_detail_cross_references_and_tasks(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, f"/services/{o.SVC_WEB}"))
    assert "<h1><span class=\"kind\">Service</span> shop_web_api</h1>" in text
    for href in ("/stacks/shop", f"/networks/{o.NET_SHOP}", f"/configs/{o.CFG_SHOP}", f"/secrets/{o.SEC_SHOP}",
                 f"/volumes/{o.VOL_SHOP}", f"/services/{o.SVC_WEB}/logs", f"/services/{o.SVC_WEB}/tasks",
                 f"/services/{o.SVC_WEB}.atom", f"/tasks/{o.TASK_WEB_1}", f"/nodes/{o.NODE_MANAGER}",
                 f"/nodes/{o.NODE_WORKER}"):
        assert f'href="{href}"' in text, href
    assert ">shop_default</a>" in text   # the network's name, read as the caller
    tasks = text.split('<div data-block="tasks">', 1)[1].split("</div>", 1)[0]
    assert tasks.count("<tr data-id=") == 2 and "Tasks of shop_web_api (2)" in tasks
    assert "<details class=\"panel spec\">" in text and "&#34;Replicas&#34;: 2" in text
    assert '<div data-block="history">' in text and "object-history" in text
    assert "traefik" in text   # integrations


def test_node_detail_shows_facts_and_its_tasks(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, f"/nodes/{o.NODE_MANAGER}"))
    assert "manager-1" in text and "state-leader" in text and "10.0.0.1:2377" in text
    assert "<code>zone=a</code>" in text and "4 cores" in text
    tasks = text.split('<div data-block="tasks">', 1)[1].split("</div>", 1)[0]
    assert f'data-id="{o.TASK_WEB_1}"' in tasks and f'data-id="{o.TASK_MON_MANAGER}"' in tasks
    assert f'href="/nodes/{o.NODE_MANAGER}/tasks"' in text


def test_task_detail_links_service_node_and_logs(shared_client: FlaskClient) -> None:
    text = main(page(shared_client, f"/tasks/{o.TASK_DB_OLD}"))
    assert "shop_db.1" in text and "state-failed" in text and "task: non-zero exit (137)" in text
    for href in (f"/services/{o.SVC_DB}", f"/nodes/{o.NODE_DOWN}", f"/tasks/{o.TASK_DB_OLD}/logs",
                 f"/tasks/{o.TASK_DB_OLD}.atom"):
        assert f'href="{href}"' in text, href
    assert "exit code</span> 137" in text


def test_unknown_detail_is_a_404_page_with_the_problem(shared_client: FlaskClient) -> None:
    for url in ("/services/nope", "/tasks/nope", "/nodes/nope"):
        text = main(page(shared_client, url, status=404))
        assert 'class="problem"' in text and "data-block=\"facts\"" not in text


# --------------------------------------------------------------------------------------------- restricted
POLICY = {"grants": [
    {"resources": ["service:monitor", "node:worker-1"], "audience": ["user:bob"], "permissions": ["read"]},
]}


@pytest.fixture(scope="module")
def acl_client() -> Iterator[FlaskClient]:
    built: Harness = build_harness(FakeEngine(cluster()), auth_mode="headers", headers_subject="X-User",
                                   headers_groups="X-Groups", trusted_proxies=("127.0.0.1/32",),
                                   acl_policy=json.dumps(POLICY))
    built.start()
    try:
        yield built.app.test_client()
    finally:
        built.stop()


def test_a_restricted_caller_sees_only_what_the_api_shows_them(acl_client: FlaskClient) -> None:
    bob = {"X-User": "bob", "X-Groups": ""}
    text = main(page(acl_client, "/services", headers=bob))
    assert len(body_rows(text)) == 1 and ">monitor</a>" in text and "shop_web_api" not in text
    text = main(page(acl_client, "/nodes", headers=bob))
    assert ">worker-1</a>" in text and "manager-1" not in text
    text = main(page(acl_client, f"/services/{o.SVC_WEB}", status=403, headers=bob))
    assert "ACL001" in text and "shop_web_api" not in text
    text = main(page(acl_client, f"/services/{o.SVC_MONITOR}", headers=bob))
    assert "monitor" in text and "shop" not in text.split('<div data-block="history">')[0]


def test_every_link_carries_the_base_path() -> None:
    """Under server.base_path every href the pages build (stack, service, node, network, logs, feeds) is
    prefixed; only the sort links are relative to the page itself."""
    built = build_harness(FakeEngine(cluster()), base_path="/shoal")
    built.start()
    try:
        client = built.app.test_client()
        for url, built_link in (("/shoal/services", "/shoal/stacks/shop"),
                                ("/shoal/tasks", f"/shoal/nodes/{o.NODE_MANAGER}"),
                                ("/shoal/nodes", f"/shoal/nodes/{o.NODE_MANAGER}"),
                                (f"/shoal/services/{o.SVC_WEB}", f"/shoal/networks/{o.NET_SHOP}"),
                                (f"/shoal/nodes/{o.NODE_MANAGER}", f"/shoal/services/{o.SVC_WEB}"),
                                (f"/shoal/tasks/{o.TASK_WEB_1}", f"/shoal/tasks/{o.TASK_WEB_1}/logs"),
                                (f"/shoal/services/{o.SVC_WEB}/tasks", f"/shoal/nodes/{o.NODE_WORKER}")):
            text = main(page(client, url))
            hrefs = re.findall(r'href="([^"]*)"', text)
            assert built_link in hrefs, (url, built_link)
            assert [h for h in hrefs if not h.startswith(("/shoal/", "?"))] == [], url
    finally:
        built.stop()
