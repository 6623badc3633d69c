"""The real browser of the dashboard tests: Debian's Chromium driven by Playwright (no browser download).

``browser`` is one Chromium per test module; ``visit`` opens a page and records every console error and
failed request, ``assert_clean`` fails a test that saw any, ``assert_accessible`` runs axe-core on the page
and fails on a serious or critical violation (the issue's bar). Pages keep an EventSource open, so never
wait for ``networkidle``: wait for a selector or ``load``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium", pytrace=False)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Visit:
    page: Any
    errors: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)   # "<status> <url>" of every answer >= 400

    def assert_clean(self) -> None:
        assert not self.errors, "console errors / failed requests:\n" + "\n".join(self.errors)


def visit(browser: Any, url: str, *, wait_for: str = "main", headers: dict[str, str] | None = None,
          color_scheme: str = "light") -> Visit:
    """A new page (own context: cookies and storage do not leak between visits) at ``url``."""
    context = browser.new_context(extra_http_headers=headers or {}, color_scheme=color_scheme,
                                  viewport={"width": 1400, "height": 900})
    page = context.new_page()
    seen = Visit(page)
    page.on("console", lambda msg: seen.errors.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" else None)
    page.on("pageerror", lambda exc: seen.errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: seen.errors.append(f"failed: {req.url} {req.failure}")
            if "event-stream" not in (req.headers.get("accept") or "") else None)
    page.on("response", lambda res: seen.bad_responses.append(f"{res.status} {res.url}")
            if res.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.wait_for_selector(wait_for)
    return seen


def assert_accessible(page: Any) -> None:
    """axe-core: no serious or critical violation on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page)
    bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
           for v in result.response["violations"] if v.get("impact") in ("serious", "critical")]
    assert not bad, "axe violations:\n" + "\n".join(bad)


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot of the page for the docs (docs/screenshots/<name>.png)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    return target
