"""The history pages against the lab swarm, through the real gunicorn and headless Chromium: /history and a
record page render the swarm's records with no console error and no serious axe violation; a change made
with the docker CLI appears in an open /history page without a reload (within 5 s); /events is a live log;
a write through Shoal's REST API (an app in the test process, level 1) shows who made it (via REST,
its request id) on both pages."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.conftest import docker_lines, running_app, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    cli_service,
    json_answer,
    not_reloaded,
    screenshot,
    visit,
    wait_live,
    watch,
)

pytestmark = pytest.mark.integration
APPEARS_WITHIN_MS = 5_000     # the brief's bar: a change is on the open page within 5 s
ROWS = "table.history tbody tr[data-seq]"


def history(server: str, **params: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json_answer(server, "/history", **params)["items"]
    return items


@pytest.fixture
def service(docker_host: str) -> Iterator[tuple[str, str]]:
    """A fresh one-replica service made with the docker CLI: (name, id); removed afterwards."""
    with cli_service(docker_host, "dashhist") as made:
        yield made


def cached(server: str, service_id: str) -> None:
    wait_for(lambda: history(server, type="service", resourceId=service_id), 20, interval=0.2,
             message="the service's create in /history")


def test_history_and_a_record_render_clean_and_accessible(server: str, browser: Any, docker_host: str,  # noqa: F811
                                                          service: tuple[str, str]) -> None:
    name, service_id = service
    cached(server, service_id)
    docker_lines(docker_host, "service", "update", "--detach", "--label-add", "shoal.dash.tier=gold", name)
    update = wait_for(lambda: next((item for item in history(server, type="service", resourceId=service_id)
                                    if item["action"] == "update" and item.get("changes")), None), 20,
                      interval=0.2, message="the label update in /history")
    assert isinstance(update, dict)

    seen = visit(browser, f"{server}/history", wait_for=ROWS)
    page = seen.page
    items = history(server)   # read after the page: the lab's crash-looping demo service may have moved on
    assert page.locator(ROWS).count() == len(items) > 0
    first = page.locator(ROWS).first.get_attribute("data-seq")
    shown = next(item for item in items if str(item["id"]) == first)   # the page's newest is in the JSON
    assert page.locator(f"{ROWS} a[href='{shown['@id']}']").count() >= 1
    wait_live(page)
    screenshot(page, "history")
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()
    dark = visit(browser, f"{server}/history", wait_for=ROWS, color_scheme="dark")   # contrast of the dark theme
    assert_accessible(dark.page)
    dark.assert_clean()
    dark.page.context.close()

    seen = visit(browser, f"{server}{update['@id']}", wait_for="table.diff")
    page = seen.page
    label = page.locator("table.diff tbody tr", has_text='Spec.Labels["shoal.dash.tier"]')
    assert label.count() == 1
    assert label.locator("td.old").inner_text().strip() == "(absent)"
    assert label.locator("td.new").inner_text().strip() == "gold"
    assert "outside Shoal" not in page.content() and "Not made through Shoal" in page.content()   # the CLI
    assert page.locator(f"a[href='/services/{service_id}']").count() >= 1
    screenshot(page, "history-record")
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()


def test_a_cli_change_appears_in_the_open_history_page(server: str, browser: Any, docker_host: str,  # noqa: F811
                                                       service: tuple[str, str]) -> None:
    name, service_id = service
    cached(server, service_id)
    seen = watch(browser, f"{server}/history?type=service", wait_for=ROWS)
    page = seen.page
    # history.js (loaded by app.js for [data-history]; init is idempotent, so importing it here is harmless)
    page.evaluate("import('/static/js/history.js').then((m) => m.init())")
    before = page.locator(ROWS).first.get_attribute("data-seq")
    key = f"shoal.dash.{uuid.uuid4().hex[:6]}"
    docker_lines(docker_host, "service", "update", "--detach", "--label-add", f"{key}=1", name)
    page.wait_for_selector(f"{ROWS}:has-text('label {key}')", timeout=APPEARS_WITHIN_MS)
    row = page.locator(ROWS).first
    assert key in row.inner_text() and name in row.inner_text() and "outside Shoal" in row.inner_text()
    assert not_reloaded(page)
    # the new record flashes and is announced; the ones shown before do not flash
    assert "changed" in (row.get_attribute("class") or "")
    assert "changed" not in (page.locator(f"{ROWS}[data-seq='{before}']").get_attribute("class") or "")
    assert re.fullmatch(r"\d+ new changes?", (page.locator("[data-history-status]").text_content() or "").strip())
    seen.assert_clean()
    page.context.close()


def test_events_page_is_a_live_log(server: str, browser: Any, docker_host: str,  # noqa: F811
                                   service: tuple[str, str]) -> None:
    name, service_id = service
    cached(server, service_id)
    newest = history(server, limit="1")[0]   # read before the page: the page shows it or later records
    seen = watch(browser, f"{server}/events", wait_for=".event-log li[data-seq]")
    page = seen.page
    assert int(page.locator(".event-log li[data-seq]").first.get_attribute("data-seq") or 0) >= newest["id"]
    key = f"shoal.events.{uuid.uuid4().hex[:6]}"
    docker_lines(docker_host, "service", "update", "--detach", "--label-add", f"{key}=1", name)
    page.wait_for_selector(f".event-log li:has-text('label {key}')", timeout=APPEARS_WITHIN_MS)
    assert not_reloaded(page)
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()


@pytest.fixture(scope="module")
def writer(docker_host: str) -> Iterator[FlaskClient]:
    """An app in this process at operations level 1 (scale is allowed), following the lab: its test client."""
    for app in running_app(docker_host, operations_level=1):
        yield app.test_client()


def test_a_rest_write_shows_who_made_it(writer: FlaskClient, service: tuple[str, str]) -> None:
    _, service_id = service

    def records() -> list[dict[str, Any]]:
        answer = writer.get(f"/history?type=service&resourceId={service_id}", headers={"Accept": "application/json"})
        assert answer.status_code == 200
        items: list[dict[str, Any]] = answer.get_json()["items"]
        return items

    wait_for(records, 20, interval=0.2, message="the service in the app's history")
    scaled = writer.put(f"/services/{service_id}/scale", json={"replicas": 2})
    assert scaled.status_code == 200, scaled.get_data(as_text=True)
    stamped = wait_for(lambda: next((item for item in records() if item["audit"]), None), 20, interval=0.2,
                       message="the audited scale")
    assert isinstance(stamped, dict) and stamped["summary"] == "replicas 1→2"
    request_id = stamped["audit"]["requestId"]
    assert request_id == scaled.headers["Request-Id"]

    page = writer.get(f"/history?type=service&resourceId={service_id}", headers={"Accept": "text/html"})
    row = re.search(rf'<tr data-seq="{stamped["id"]}">.*?</tr>', page.get_data(as_text=True), re.S)
    assert row is not None
    assert '<span class="who-made">anonymous</span> <span class="via muted">via REST</span>' in row.group(0)

    record = writer.get(stamped["@id"], headers={"Accept": "text/html"}).get_data(as_text=True)
    audit = record.split('id="audit-head"')[1].split("</section>")[0]
    assert "<dd>anonymous</dd>" in audit and "REST API" in audit and f"<code>{request_id}</code>" in audit
    diff = record.split('<table class="list diff">')[1].split("</table>")[0]
    assert re.search(r"Replicas</code></th>\s*<td class=\"old\"><code>1</code></td>.*?"
                     r"<td class=\"new\"><code>2</code></td>", diff, re.S)
