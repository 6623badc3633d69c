"""The services, tasks and nodes pages against the lab swarm, through the real gunicorn and headless
Chromium: every list and detail renders the swarm's data with no console error and no serious axe
violation; a service created with the docker CLI appears in an open /services page without a reload; a
replica change made with the docker CLI shows in the open service page's task table without a reload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import docker_lines, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    create_service,
    not_reloaded,
    removed_afterwards,
    screenshot,
    visit,
    watch,
)

pytestmark = pytest.mark.integration
APPEARS_WITHIN_MS = 5_000     # the brief's bar: a change is on the open page within 5 s
CONVERGE_S = 60               # the engine scheduling and starting busybox tasks


def first(server: str, path: str, **params: str) -> dict[str, Any]:
    answer = requests.get(f"{server}{path}", params={"limit": "1", **params}, timeout=10)
    answer.raise_for_status()
    items: list[dict[str, Any]] = answer.json()["items"]
    assert items, f"{path} is empty on the lab"
    return items[0]


@pytest.fixture
def service_name(docker_host: str) -> Iterator[str]:
    """A fresh name; the service of that name (if a test created it) is removed afterwards."""
    with removed_afterwards(docker_host, "service", "dashres") as name:
        yield name


@pytest.mark.parametrize(("path", "rows", "shot"), [
    ("/services", "tbody[data-block=rows] tr[data-id]", "services-list"),
    ("/tasks", "tbody[data-block=rows] tr[data-id]", "tasks-list"),
    ("/nodes", "tbody[data-block=rows] tr[data-id]", "nodes-list"),
])
def test_lists_render_clean_and_accessible(server: str, browser: Any, path: str, rows: str,  # noqa: F811
                                           shot: str) -> None:
    seen = visit(browser, f"{server}{path}", wait_for=rows)
    page = seen.page
    count = page.locator(rows).count()
    # the page's own total (the lab's crashing services add tasks: a second read may already differ)
    total = int(page.inner_text("[data-block=count]").split()[0])
    assert count == min(total, 50) and count > 0
    item = first(server, path)   # the swarm's data, named as an operator knows it
    label = {"/services": lambda i: i["Spec"]["Name"], "/tasks": lambda i: i["ServiceName"],
             "/nodes": lambda i: i["Description"]["Hostname"]}[path](item)
    assert label in page.inner_text("tbody[data-block=rows]")
    assert page.locator("th[scope=col] a[href*='sort=']").count() >= 1   # sortable heads
    page.locator("#freshness[data-state=live]").wait_for(timeout=10_000)
    screenshot(page, shot)
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()


def test_details_render_clean_and_accessible(server: str, browser: Any) -> None:  # noqa: F811
    service = first(server, "/services", filter='name.startsWith("demo")')
    task = first(server, "/tasks", filter='state == "running"')
    node = first(server, "/nodes")
    pages = [
        (f"/services/{service['ID']}", "[data-block=tasks] tbody tr[data-id]", "service-detail",
         service["Spec"]["Name"]),
        (f"/nodes/{node['ID']}", "[data-block=tasks] tbody tr[data-id]", "node-detail",
         node["Description"]["Hostname"]),
        (f"/tasks/{task['ID']}", "[data-block=facts] dl.fields", None, task["ServiceName"]),
        (f"/services/{service['ID']}/tasks", "tbody[data-block=rows] tr[data-id]", None, task["ID"][:12]),
        (f"/nodes/{node['ID']}/tasks", "tbody[data-block=rows] tr[data-id]", None, None),
    ]
    for path, ready, shot, text in pages:
        seen = visit(browser, f"{server}{path}", wait_for=ready)
        page = seen.page
        if text and path.endswith("/tasks") and not path.startswith("/nodes"):
            text = None   # the service's tasks page lists its own tasks, not necessarily that one
        if text:
            assert text in page.inner_text("main"), (path, text)
        page.locator("#freshness[data-state=live]").wait_for(timeout=10_000)
        if shot:
            screenshot(page, shot)
        assert_accessible(page)
        seen.assert_clean()
        page.context.close()


def test_a_created_service_appears_in_the_open_list(server: str, browser: Any, docker_host: str,  # noqa: F811
                                                    service_name: str) -> None:
    seen = watch(browser, f"{server}/services?limit=200", wait_for="tbody[data-block=rows] tr[data-id]")
    page = seen.page
    assert service_name not in page.inner_text("tbody[data-block=rows]")
    service_id = create_service(docker_host, service_name, 1)
    page.locator(f"tbody[data-block=rows] tr[data-id='{service_id}']").wait_for(timeout=APPEARS_WITHIN_MS)
    row = page.locator(f"tbody[data-block=rows] tr[data-id='{service_id}']")
    assert service_name in row.inner_text()
    assert not_reloaded(page)
    seen.assert_clean()
    page.context.close()


def test_a_replica_change_shows_in_the_open_service_page(server: str, browser: Any, docker_host: str,  # noqa: F811
                                                         service_name: str) -> None:
    service_id = create_service(docker_host, service_name, 1)
    wait_for(lambda: requests.get(f"{server}/services/{service_id}/tasks", timeout=5).json()["total"] == 1,
             CONVERGE_S, interval=0.3, message="the service's first task in the cache")
    rows = "[data-block=tasks] tbody tr[data-id]"
    seen = watch(browser, f"{server}/services/{service_id}", wait_for=rows)
    page = seen.page
    assert page.locator(rows).count() == 1
    docker_lines(docker_host, "service", "scale", "--detach", f"{service_name}=3")
    # locator waits, not wait_for_function: the page's CSP (no unsafe-eval) refuses a polled expression
    page.locator(rows).nth(2).wait_for(timeout=APPEARS_WITHIN_MS)
    assert page.locator(rows).count() == 3
    # the summary's desired count follows in the same refresh
    page.locator("[data-block=summary] .count", has_text="/3").wait_for(timeout=APPEARS_WITHIN_MS)
    assert not_reloaded(page)
    seen.assert_clean()
    page.context.close()


def test_dark_theme_is_accessible_too(server: str, browser: Any) -> None:  # noqa: F811
    """Contrast differs per theme: the badges, meters and muted text checked in the dark one as well."""
    service = first(server, "/services", filter='name.startsWith("demo")')
    for path, ready in (("/tasks", "tbody[data-block=rows] tr[data-id]"),
                        (f"/services/{service['ID']}", "[data-block=tasks] tbody tr[data-id]")):
        seen = visit(browser, f"{server}{path}", wait_for=ready, color_scheme="dark")
        assert seen.page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"
        assert_accessible(seen.page)
        seen.assert_clean()
        seen.page.context.close()
