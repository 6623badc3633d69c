"""An open dashboard page behind a plain nginx survives a restart of the service: nginx answers 502 while
gunicorn is down (a bare EventSource would give up for good), the page shows "reconnecting", then resumes
with the change made during the outage, without a reload, and goes back to "live". A tab costs one stream."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.dashboard_browser import browser, visit  # noqa: F401 - the fixture
from tests.nginx import start_plain_proxy, stop_nginx


def _open_streams(base: str) -> int:
    text = requests.get(base + "/-/metrics", timeout=5).text
    found = re.search(r"^shoal_open_streams (\d+)", text, re.M)
    assert found, text[:2000]
    return int(found.group(1))


def _state(page: Any) -> str:
    return str(page.get_attribute("#freshness", "data-state"))


def test_an_open_page_survives_a_restart_behind_nginx(browser: Any, docker_host: str, engine: Any,  # noqa: F811
                                                      tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path / "state"))
    proc = launch_gunicorn(env, tmp_path / "first.log", base)
    proxy = start_plain_proxy(tmp_path / "nginx", base)
    config_id = None
    try:
        seen = visit(browser, proxy.url + "/configs")
        page = seen.page
        wait_for(lambda: _state(page) == "live", 15, message="the page's stream open")
        page.evaluate("window.__shoalNotReloaded = true")
        wait_for(lambda: _open_streams(base) == 1, 10, message="one stream for the tab")

        stop_gunicorn(proc, tmp_path / "first.log")
        wait_for(lambda: _state(page) == "reconnecting", 15, message="the indicator to show the drop")
        assert requests.get(proxy.url + "/configs", timeout=5).status_code == 502   # nginx: upstream down
        name = f"dash-restart-{port}"
        config_id = engine.create_config(name, b"made while shoal was down")["ID"]

        proc = launch_gunicorn(env, tmp_path / "second.log", base)
        wait_for(lambda: name in page.inner_text("main"), 45, message="the outage's change in the open page")
        wait_for(lambda: _state(page) == "live", 15, message="the indicator back to live")
        assert page.evaluate("window.__shoalNotReloaded === true"), "the page was reloaded"
        assert _open_streams(base) == 1
        outage = [r for r in seen.bad_responses if not r.startswith(("502 ", "503 "))]
        assert not outage, outage   # the outage's 502s (nginx) and 503s (before the first sync), nothing else
        stop_gunicorn(proc, tmp_path / "second.log")
    finally:
        stop_nginx(proxy)
        if config_id:
            engine.remove_config(config_id)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
