"""The command palette, the search page and the API reference against the lab swarm, through the real
gunicorn and headless Chromium: Ctrl-K opens the palette, typing a lab service's name lists it, Enter opens
its page; "/" and the header's box open it too, Escape closes it; the /api reference and /search render
with no console error and no serious axe violation (the palette open included)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    screenshot,
    visit,
)

pytestmark = pytest.mark.integration
SERVICE = "demo_web"          # scripts/lab-swarm's demo stack
WAIT_MS = 10_000


def service_id(server: str, name: str) -> str:
    answer = requests.get(f"{server}/search", params={"q": name, "limit": "1"}, timeout=10)
    answer.raise_for_status()
    hits = answer.json()["results"].get("services") or []
    assert hits and hits[0]["name"] == name, f"{name} is not on the lab: {answer.json()}"
    return str(hits[0]["id"])


def palette_ready(page: Any) -> None:
    """palette.js has run (it links its stylesheet first). No wait_for_function: the page's CSP forbids
    the eval Playwright polls string predicates with."""
    page.locator('link[href$="/static/css/palette.css"]').wait_for(state="attached", timeout=WAIT_MS)


def searched(page: Any) -> None:
    """The palette's search for the current text has answered (closing it earlier aborts the request,
    which the browser reports as a failed request)."""
    expect(page.locator("#palette-status")).to_have_text(re.compile(r"match|Nothing"), timeout=WAIT_MS)


def first_option(page: Any) -> Any:
    return page.locator("#palette-list [role=option]").first


def test_ctrl_k_finds_a_lab_service_and_enter_opens_it(browser: Any, server: str) -> None:  # noqa: F811
    wanted = service_id(server, SERVICE)
    seen = visit(browser, f"{server}/api/errors", wait_for="#top-search")
    page = seen.page
    palette_ready(page)
    page.keyboard.press("Control+k")
    page.wait_for_selector("dialog#palette[open]", timeout=WAIT_MS)
    assert page.evaluate("document.activeElement.id") == "palette-input"
    page.keyboard.type(SERVICE)
    # the hits follow the commands (debounced fetch): wait until the first option is a service
    option = first_option(page)
    expect(option.locator(".palette-kind")).to_have_text("Service", timeout=WAIT_MS)
    # the service (an exact name match) comes first, active, announced through aria-activedescendant
    assert option.get_attribute("aria-selected") == "true"
    assert option.locator(".palette-label").text_content() == SERVICE
    combo = page.locator("#palette-input")
    assert combo.get_attribute("aria-activedescendant") == option.get_attribute("id")
    assert combo.get_attribute("aria-expanded") == "true"
    # the last option is the search page for the query; arrow keys move the active option
    assert "All results for" in page.locator("#palette-list [role=option]").last.inner_text()
    page.keyboard.press("ArrowDown")
    second = page.locator("#palette-list [role=option]").nth(1)
    assert second.get_attribute("aria-selected") == "true" and option.get_attribute("aria-selected") == "false"
    page.keyboard.press("ArrowUp")
    assert option.get_attribute("aria-selected") == "true"
    assert_accessible(page)
    screenshot(page, "palette")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/services/{wanted}", timeout=WAIT_MS)
    page.wait_for_selector("main")
    # typed key by key, a pause over the debounce sends a query that the next key aborts (by design):
    # the browser reports those as failed requests; any other failure still fails the test
    aborted = [e for e in seen.errors if "/search?q=" in e and "ERR_ABORTED" in e]
    seen.errors[:] = [e for e in seen.errors if e not in aborted]
    seen.assert_clean()
    page.context.close()


def test_slash_and_the_header_box_open_it_escape_closes_it(browser: Any, server: str) -> None:  # noqa: F811
    seen = visit(browser, f"{server}/api/errors", wait_for="#top-search")
    page = seen.page
    palette_ready(page)
    page.keyboard.press("/")
    page.wait_for_selector("dialog#palette[open]", timeout=WAIT_MS)
    # with nothing typed: the pages of the navigation and the theme command
    labels = page.locator("#palette-list [role=option]").all_inner_texts()
    assert any("Services" in text for text in labels) and any("theme" in text for text in labels)
    page.keyboard.press("Escape")
    page.wait_for_selector("dialog#palette:not([open])", state="attached", timeout=WAIT_MS)
    # typing in the header's search box continues in the palette, with what was typed
    page.locator("#top-search").press_sequentially("dem")
    page.wait_for_selector("dialog#palette[open]", timeout=WAIT_MS)
    expect(page.locator("#palette-input")).to_have_value("dem", timeout=WAIT_MS)
    assert page.locator("#top-search").input_value() == ""
    # the theme command switches the theme and closes the palette
    page.locator("#palette-input").fill("toggle dark")
    page.locator("#palette-list [role=option]", has_text="theme").first.wait_for(timeout=WAIT_MS)
    searched(page)
    before = page.evaluate("document.documentElement.dataset.theme || ''")
    page.keyboard.press("Enter")
    page.wait_for_selector("dialog#palette:not([open])", state="attached", timeout=WAIT_MS)
    assert page.evaluate("document.documentElement.dataset.theme || ''") != before
    seen.assert_clean()
    page.context.close()


def test_api_reference_in_chromium(browser: Any, server: str) -> None:  # noqa: F811
    document = requests.get(f"{server}/api", timeout=30).json()
    count = sum(1 for item in document["paths"].values() for method in item if method != "parameters")
    seen = visit(browser, f"{server}/api#op-put-services-id-scale", wait_for="details.op")
    page = seen.page
    assert page.url.startswith(f"{server}/api")                  # not sent to the overview
    assert page.locator("details.op").count() == count
    page.wait_for_selector("details#op-put-services-id-scale[open]", timeout=WAIT_MS)   # apiref.js
    screenshot(page, "api-reference")
    assert_accessible(page)
    # narrowing as you type (script) matches the server's ?q= filter
    page.locator("#api-filter").fill("scale")
    expect(page.locator("#api-count")).to_have_text("2 operations", timeout=WAIT_MS)   # PUT and OPTIONS
    page.locator("#api-filter").fill("put scale")
    expect(page.locator("#api-count")).to_have_text("1 operation", timeout=WAIT_MS)
    assert page.locator("details.op:not(.api-hidden)").count() == 1
    assert "q=put+scale" in page.url
    # a schema link inside an operation opens the schema it points at
    page.locator("#op-put-services-id-scale a[href='#schema-ServiceWriteDetailV1']").first.click()
    page.wait_for_selector("details#schema-ServiceWriteDetailV1[open]", timeout=WAIT_MS)
    seen.assert_clean()
    page.context.close()


def test_search_page_in_chromium(browser: Any, server: str) -> None:  # noqa: F811
    wanted = service_id(server, SERVICE)
    seen = visit(browser, f"{server}/search?q={SERVICE}", wait_for="#hits-services")
    page = seen.page
    link = page.locator(f"#hits-services ~ table a[href='/services/{wanted}']")
    assert link.inner_text() == SERVICE
    assert_accessible(page)
    screenshot(page, "search")
    # without script the form is a GET: submitting another query lands on its own URL
    page.locator("#search-q").fill("demo")
    page.locator("form.search-page button[type=submit]").click()
    page.wait_for_url(f"{server}/search?q=demo&limit=*", timeout=WAIT_MS)
    page.wait_for_selector("#hits-services")
    seen.assert_clean()
    page.context.close()
