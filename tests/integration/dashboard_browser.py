"""The real browser of the dashboard tests: Debian's Chromium driven by Playwright (no browser download).

``browser`` is one Chromium per test module; ``visit`` opens a page and records every console error and
failed request, ``assert_clean`` fails a test that saw any, ``assert_accessible`` runs axe-core on the page
and fails on a serious or critical violation (the issue's bar). Pages keep an EventSource open, so never
wait for ``networkidle``: wait for a selector or ``load``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import docker_lines, wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL

CHROMIUM = "/usr/bin/chromium"
LIVE_WITHIN_MS = 10_000       # a page's stream is open (freshness badge "live") this soon after load
REMOVED_WITHIN_S = 30         # the engine's tasks of a removed test service are gone this soon
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

    def reload(self, wait_for: str = "main") -> None:
        """Reload the page; the requests of the old document the reload itself cuts off (favicon, a
        fragment fetch: net::ERR_ABORTED) are the test's doing, not failures of the page."""
        before = len(self.errors)
        self.page.reload(wait_until="load")
        self.page.wait_for_selector(wait_for)
        self.errors[before:] = [e for e in self.errors[before:] if "net::ERR_ABORTED" not in e]


def visit(browser: Any, url: str, *, wait_for: str = "main", headers: dict[str, str] | None = None,
          color_scheme: str = "light", on_request: Callable[[Any], None] | None = None) -> Visit:
    """A new page (own context: cookies and storage do not leak between visits) at ``url``; ``on_request``
    sees every request the page makes from its first one on."""
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
    if on_request is not None:
        page.on("request", on_request)
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
    """A screenshot of the page: into docs/screenshots/<name>.png when ``SHOAL_SCREENSHOTS=1`` (regenerating
    the docs' pictures), else into a temporary directory, so a test run leaves the checkout as it was."""
    regenerate = os.environ.get("SHOAL_SCREENSHOTS") == "1"
    folder = SCREENSHOTS if regenerate else Path(tempfile.gettempdir()) / "shoal-screens"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    assert target.stat().st_size > 1000, f"an empty screenshot of {name}"
    return target


def wait_live(page: Any) -> None:
    """Until the page's stream is open (the freshness badge says live): a change made after it is pushed.
    A locator wait, not wait_for_function: the pages' CSP (no unsafe-eval) refuses a polled expression."""
    page.locator("#freshness[data-state=live]").wait_for(timeout=LIVE_WITHIN_MS)


def mark_document(page: Any) -> None:
    """A marker on the window: still there later means the page was not reloaded."""
    page.evaluate("window.__shoalMarker = 'kept'")


def not_reloaded(page: Any) -> bool:
    return bool(page.evaluate("window.__shoalMarker === 'kept'"))


def watch(browser: Any, url: str, *, wait_for: str = "main") -> Visit:
    """A visit whose page is live and marked: what a test of a change appearing without a reload starts from."""
    seen = visit(browser, url, wait_for=wait_for)
    wait_live(seen.page)
    mark_document(seen.page)
    return seen


def json_answer(server: str, path: str, **params: str) -> Any:
    """The JSON answer of a GET on the server (what the page rendered, read as an API client)."""
    response = requests.get(f"{server}{path}", params=params, headers={"Accept": "application/json"}, timeout=10)
    response.raise_for_status()
    return response.json()


def create_service(docker_host: str, name: str, replicas: int = 1) -> str:
    """A test service made with the docker CLI (labelled for the lab's cleanup); its id."""
    lines = docker_lines(docker_host, "service", "create", "--detach", "--quiet", "--name", name,
                         "--label", f"{TEST_LABEL}=1", "--replicas", str(replicas), "--stop-grace-period", "1s",
                         "--endpoint-mode", "dnsrr", IMAGE, "sleep", "3600")
    return lines[-1].strip()


def _tasks_gone(docker_host: str, service_id: str) -> None:
    """Until the engine holds no task of a removed service: its tasks going away later would move the task
    counts a following test watches (the overview's total drops while that test's scale adds one)."""
    import docker

    client = docker.APIClient(base_url=docker_host, version="1.41", timeout=30)
    try:
        # all tasks, filtered here: the engine refuses a service filter naming a removed service (404)
        wait_for(lambda: all(task["ServiceID"] != service_id for task in client.tasks()), REMOVED_WITHIN_S,
                 interval=0.3, message=f"the tasks of the removed service {service_id} gone")
    finally:
        client.close()


@contextlib.contextmanager
def removed_afterwards(docker_host: str, kind: str, prefix: str) -> Iterator[str]:
    """A fresh name for a `docker <kind>` object; the object of that name, if the test made it, is removed
    (a service: and its tasks gone)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):   # the test may not have made it
            made = docker_lines(docker_host, kind, "inspect", "--format", "{{.ID}}", name)[-1].strip()
            docker_lines(docker_host, kind, "rm", name)
            if kind == "service":
                _tasks_gone(docker_host, made)


@contextlib.contextmanager
def cli_service(docker_host: str, prefix: str, replicas: int = 1) -> Iterator[tuple[str, str]]:
    """A fresh service made with the docker CLI around a test: (name, id); removed afterwards."""
    with removed_afterwards(docker_host, "service", prefix) as name:
        yield name, create_service(docker_host, name, replicas)
