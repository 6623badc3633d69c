"""The dashboard under ``server.base_path``: every page, asset, fragment, stream and link stays under the
prefix (a request outside it would be a 404 and a console error), and the live link works there too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.dashboard_browser import assert_accessible, browser, visit  # noqa: F401 - the fixture

PREFIX = "/ops/shoal"
PAGES = ["/", "/services", "/tasks", "/nodes", "/stacks", "/configs", "/history", "/topology", "/api"]


@pytest.fixture(scope="module")
def prefixed(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    work = tmp_path_factory.mktemp("base-path")
    base = f"http://127.0.0.1:{port}{PREFIX}"
    proc = launch_gunicorn(gunicorn_env(docker_host, port, SERVICE_BASE_PATH=PREFIX,
                                        SERVICE_DATA_DIR=str(work / "state")), work / "gunicorn.log", base)
    yield base
    stop_gunicorn(proc, work / "gunicorn.log")


@pytest.mark.parametrize("path", PAGES)
def test_every_request_of_a_page_stays_under_the_prefix(prefixed: str, browser: Any, path: str) -> None:  # noqa: F811
    requested: list[str] = []
    # recorded from the first request on (a reload to start counting would abort the first load's
    # favicon and fragment fetches: failed requests that are the test's own doing)
    seen = visit(browser, prefixed + path, on_request=lambda req: requested.append(req.url))
    seen.page.wait_for_selector("html[data-ready]")
    origin = prefixed[: -len(PREFIX)]
    outside = [url for url in requested if url.startswith(origin) and not url.startswith(prefixed + "/")
               and url != prefixed]
    assert not outside, outside
    links = seen.page.eval_on_selector_all("a[href^='/']", "els => els.map(e => e.getAttribute('href'))")
    assert links and all(href.startswith(PREFIX) for href in links), [h for h in links if not h.startswith(PREFIX)]
    assert not seen.bad_responses, seen.bad_responses
    seen.assert_clean()
    seen.page.context.close()


def test_the_live_link_works_under_the_prefix(prefixed: str, browser: Any, engine: Any, tmp_path: Path) -> None:  # noqa: F811
    seen = visit(browser, prefixed + "/configs")
    page = seen.page
    assert (page.get_attribute("main", "data-stream") or "").startswith(PREFIX + "/")
    wait_for(lambda: page.get_attribute("#freshness", "data-state") == "live", 15, message="the stream open")
    name = f"dash-prefix-{tmp_path.name[-8:]}"
    config_id = engine.create_config(name, b"x")["ID"]
    try:
        wait_for(lambda: name in page.inner_text("main"), 10, message="the new config in the open page")
    finally:
        engine.remove_config(config_id)
    assert_accessible(page)
    seen.assert_clean()
