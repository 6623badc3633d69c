"""The overview, cluster, recommendations, swarm, plugins and profile pages against the lab swarm, through
the real gunicorn and headless Chromium: every page renders the lab's data with no console error and no
serious axe violation; the overview's task count follows a `docker service scale` made with the CLI without
a reload (within 5 s); screenshots for the docs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import docker_lines, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    cli_service,
    json_answer,
    mark_document,
    not_reloaded,
    screenshot,
    visit,
    wait_live,
)

pytestmark = pytest.mark.integration
CHANGES_WITHIN_MS = 5_000     # the brief's bar: a change is on the open page within 5 s


def count(page: Any, name: str) -> int:
    return int(page.locator(f'[data-count="{name}"]').first.inner_text().strip())


@pytest.fixture
def service(docker_host: str) -> Iterator[str]:
    """A fresh one-replica service made with the docker CLI (its name); removed afterwards."""
    with cli_service(docker_host, "dashover") as (name, _):
        yield name


def test_overview_shows_the_lab_and_follows_a_cli_scale(server: str, browser: Any, docker_host: str,  # noqa: F811
                                                        service: str) -> None:
    wait_for(lambda: json_answer(server, "/services", filter=f'name == "{service}"')["total"] == 1, 20,
             interval=0.2, message="the new service in the cache")
    wait_for(lambda: json_answer(server, "/recommendations")["computedAt"], 20, interval=0.2,
             message="the first recommendations run")
    seen = visit(browser, f"{server}/", wait_for='[data-count="tasks"]')
    page = seen.page
    wait_live(page)
    cluster = json_answer(server, "/cluster")
    assert count(page, "nodes") == cluster["nodeCount"]
    assert count(page, "services") == cluster["serviceCount"] >= 1
    assert count(page, "stacks") == cluster["stackCount"] >= 2   # the lab's demo and ops stacks
    managers = json_answer(server, "/nodes", filter='role == "manager"')["items"]
    leader = next(n for n in managers if n["ManagerStatus"].get("Leader"))
    assert page.locator(f"section[data-block=health] a[href='{leader['@id']}']").count() == 1
    capacity = json_answer(server, "/cluster/capacity")
    assert page.locator("table.capacity tbody meter").count() == 2 * len(capacity["nodes"])
    # the lab's crasher keeps findings moving, and /events carries no recommendation events: a reload may
    # be needed to catch the page and the JSON at the same evaluation
    for _attempt in range(3):
        summary = json_answer(server, "/recommendations")["summary"]
        if {s: count(page, f"findings-{s}") for s in summary} == summary:
            break
        seen.reload('[data-count="tasks"]')
    assert {s: count(page, f"findings-{s}") for s in summary} == summary
    latest = json_answer(server, "/history", limit="10")["items"]
    assert page.locator("table.history tbody tr[data-seq]").count() == len(latest) == 10
    screenshot(page, "overview")
    assert_accessible(page)
    seen.assert_clean()

    # a scale made outside Shoal reaches the open page through /events, without a reload (live again first:
    # a reload above reopens the stream, and a change before it is open is not pushed)
    wait_live(page)
    mark_document(page)
    before = count(page, "tasks")
    docker_lines(docker_host, "service", "scale", "--detach", f"{service}=2")
    page.wait_for_function("(before) => Number(document.querySelector('[data-count=tasks]').textContent) > before",
                           arg=before, timeout=CHANGES_WITHIN_MS)
    assert not_reloaded(page)
    assert count(page, "tasks") >= before + 1
    seen.assert_clean()
    page.context.close()

    dark = visit(browser, f"{server}/", wait_for='[data-count="tasks"]', color_scheme="dark")
    assert dark.page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    screenshot(dark.page, "overview-dark")
    assert_accessible(dark.page)
    dark.assert_clean()
    dark.page.context.close()


# (path, a selector that only renders with the lab's data, screenshot name or None)
PAGES = [
    ("/cluster", '[data-count="tasks"]', None),
    ("/cluster/capacity", "table.capacity tbody meter", None),
    ("/disk-usage", "table.disk-usage tbody th", None),
    ("/recommendations", "tr[data-finding]", "recommendations"),
    ("/swarm", "#sw-raft", "swarm"),
    ("/plugins", "table.plugins", None),
    ("/swarm/plugins", "table.plugins", None),
    ("/profile", '[data-field="subject"]', "profile"),
    ("/auth/whoami", '[data-field="subject"]', None),
]


@pytest.mark.parametrize(("path", "selector", "shot"), PAGES, ids=[p for p, _, _ in PAGES])
def test_page_renders_clean_and_accessible(server: str, browser: Any, path: str, selector: str,  # noqa: F811
                                           shot: str | None) -> None:
    wait_for(lambda: json_answer(server, "/recommendations")["computedAt"], 20, interval=0.2,
             message="the first recommendations run")
    seen = visit(browser, f"{server}{path}", wait_for=selector)
    page = seen.page
    assert page.locator(".problem").count() == 0, page.locator(".problem").first.inner_text()
    if path == "/swarm":
        body = page.content()
        assert "SWMTKN" not in body
        swarm = json_answer(server, "/swarm")["swarm"]
        assert swarm["ID"] in body
        assert page.locator("dl.fields", has_text="Node heartbeat").count() == 1
    elif path == "/recommendations":
        # the findings move with the session's other tests (their services come and go): the page and the
        # JSON agree once both are read at a quiet moment (bounded retries)
        def agree() -> bool:
            shown = page.locator("tr[data-finding]").count()
            return shown == len(json_answer(server, "/recommendations")["items"]) > 0
        wait_for(agree, 20, interval=1, message="the page's findings equal the JSON's")
    elif path == "/disk-usage":
        assert page.locator("table.disk-usage tbody tr").count() == json_answer(server, path)["total"]
    elif path.endswith("plugins"):
        plugins = json_answer(server, path)["items"]
        assert page.locator("table.plugins tbody tr").count() == max(len(plugins), 1)
    elif path in ("/profile", "/auth/whoami"):
        assert page.locator('[data-field="subject"]').inner_text() == json_answer(server, path)["subject"]
    if shot:
        page.wait_for_function("() => document.getElementById('freshness').dataset.state !== 'syncing'",
                               timeout=10_000)
        screenshot(page, shot)
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()
