"""The write controls in a real Chromium against the lab swarm, through gunicorn at operations level 3: a scale
from the service page shows the dry run's diff first (nothing written yet), then changes the engine (docker
inspect) and the open page shows the new task count without a reload; the env editor sends a merge patch
(set, then remove a variable); a removal needs the typed name and then leaves the engine without the service;
a create from a list page; no console errors; axe passes with a dialog open. Screenshot: actions."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from tests.conftest import OPENAPI, REPO, docker_lines, free_port, gunicorn_env, stop_gunicorn, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    screenshot,
    visit,
)
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration
ROLLOUT_MS = 90_000    # Prefer: wait holds the answer until the busybox tasks run
PAGE_MS = 10_000       # a change is on the open page within this
READY_S = 180          # gunicorn's first sync on a loaded machine


def gunicorn_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory, name: str,
                    **extra: str) -> Iterator[str]:
    """gunicorn following the lab (``extra``: its environment), answers checked against /api as
    ``launch_gunicorn`` does; ready within READY_S (a lab machine shared by parallel runs boots slowly)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path: Path = tmp_path_factory.mktemp(f"gunicorn-{name}") / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp(f"state-{name}")),
                       SERVICE_SSE_KEEPALIVE="1s", **extra)
    OPENAPI.bases.add(base)
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _ready(base), READY_S, interval=0.5, message="gunicorn readiness")
    except AssertionError:
        proc.kill()
        pytest.fail(f"gunicorn did not become ready:\n{log_path.read_text()[-4000:]}", pytrace=False)
    yield base
    stop_gunicorn(proc, log_path)


def _ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/-/ready", timeout=5).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def writer(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn at operations level 3 (every write), no auth."""
    yield from gunicorn_server(docker_host, tmp_path_factory, "actions", SERVICE_OPERATIONS_LEVEL="3")


@pytest.fixture
def service(dclient: docker.DockerClient, writer: str) -> Iterator[Any]:
    created = sleeper(dclient, f"dash-act-{uuid.uuid4().hex[:6]}")
    wait_for(lambda: requests.get(f"{writer}/services/{created.id}", timeout=5).status_code == 200, 20,
             message="the service cached")
    yield created
    with contextlib.suppress(docker.errors.NotFound):
        created.remove()


def spec(engine: docker.APIClient, service_id: str) -> dict[str, Any]:
    found: dict[str, Any] = engine.inspect_service(service_id)["Spec"]
    return found


def assert_clean_after_leaving(seen: Any, left: str) -> None:
    """No console error, except the page's own refresh of ``left`` cut off by the navigation away from it
    (a change event of the write itself may start one just before the page leaves)."""
    errors = [error for error in seen.errors if not (error.startswith(f"failed: {left}")
                                                     and error.endswith("net::ERR_ABORTED"))]
    assert not errors, "console errors / failed requests:\n" + "\n".join(errors)


def until(page: Any, expression: str, timeout_ms: int = PAGE_MS) -> None:
    """Poll ``expression`` in the page until it is truthy (page.evaluate goes through the debugger protocol;
    wait_for_function's polling compiles its predicate in the page, which the CSP refuses: no unsafe-eval)."""
    for _ in range(max(1, timeout_ms // 200)):
        if page.evaluate(expression):
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"not true within {timeout_ms} ms: {expression}")


def open_dialog(page: Any, control: str) -> Any:
    page.click(f"button[data-open='{control}']")
    dialog = page.locator(f"dialog#{control}")
    dialog.wait_for(state="visible")
    return dialog


def test_scale_previews_the_dry_run_then_changes_the_engine_and_the_open_page(
        browser: Any, writer: str, service: Any, engine: docker.APIClient) -> None:  # noqa: F811
    seen = visit(browser, f"{writer}/services/{service.id}", wait_for="[data-actions]:not([hidden])")
    page = seen.page
    page.evaluate("window.__shoalMarker = 'kept'")
    dialog = open_dialog(page, f"act-svc-{service.id[:12]}-scale")
    assert dialog.locator("[data-apply]").is_disabled()       # nothing to apply before the preview
    dialog.locator("input[name=replicas]").fill("2")
    dialog.get_by_role("button", name="Preview").click()
    diff = dialog.locator("table.act-diff")
    diff.wait_for()
    row = diff.locator("tbody tr").first
    assert row.locator("th").inner_text() == "Spec.Mode.Replicated.Replicas"
    assert [cell.inner_text() for cell in row.locator("td").all()] == ["1", "2"]
    assert "replicas 1→2" in dialog.locator(".act-preview").inner_text()
    assert spec(engine, service.id)["Mode"]["Replicated"]["Replicas"] == 1    # the preview wrote nothing
    assert_accessible(page)                                                    # with the dialog open
    screenshot(page, "actions")
    apply = dialog.get_by_role("button", name="Apply")
    assert apply.is_enabled()
    apply.click()
    dialog.locator(".act-ok", has_text="Done (200)").wait_for(timeout=ROLLOUT_MS)
    assert "rollout converged, settled" in dialog.locator(".act-preview").inner_text()
    assert spec(engine, service.id)["Mode"]["Replicated"]["Replicas"] == 2
    until(page, "document.querySelector('[data-block=summary] strong.count')?.textContent.trim() === '2/2'")
    assert page.evaluate("window.__shoalMarker") == "kept"                   # no reload
    dialog.get_by_role("button", name="Close").click()
    seen.assert_clean()
    page.context.close()


def test_the_env_editor_sends_a_merge_patch(browser: Any, writer: str, service: Any,  # noqa: F811
                                            engine: docker.APIClient) -> None:
    seen = visit(browser, f"{writer}/services/{service.id}", wait_for="[data-actions]:not([hidden])")
    page = seen.page
    control = f"act-svc-{service.id[:12]}-env"

    def edit(text: str) -> Any:
        dialog = open_dialog(page, control)
        until(page, f"document.querySelector('#{control} form')._original !== undefined")
        dialog.locator("textarea[data-kv]").fill(text)
        dialog.get_by_role("button", name="Preview").click()
        dialog.locator("table.act-diff").wait_for()
        return dialog

    dialog = edit("GREETING=hello world\nMODE=test")
    preview = dialog.locator(".act-preview").inner_text()
    assert 'Env["GREETING"]' in preview and "hello world" in preview
    assert "GREETING=hello world" not in (spec(engine, service.id)["TaskTemplate"]["ContainerSpec"].get("Env") or [])
    dialog.get_by_role("button", name="Apply").click()
    dialog.locator(".act-ok", has_text="Done (200)").wait_for(timeout=ROLLOUT_MS)
    env = spec(engine, service.id)["TaskTemplate"]["ContainerSpec"]["Env"]
    assert "GREETING=hello world" in env and "MODE=test" in env
    dialog.get_by_role("button", name="Close").click()

    dialog = edit("GREETING=hello world")      # MODE's line removed: the patch sends MODE: null
    assert 'Env["MODE"]' in dialog.locator(".act-diff").inner_text()
    dialog.get_by_role("button", name="Apply").click()
    dialog.locator(".act-ok", has_text="Done (200)").wait_for(timeout=ROLLOUT_MS)
    assert spec(engine, service.id)["TaskTemplate"]["ContainerSpec"]["Env"] == ["GREETING=hello world"]
    seen.assert_clean()
    page.context.close()


def test_a_removal_needs_the_typed_name(browser: Any, writer: str, service: Any,  # noqa: F811
                                       engine: docker.APIClient) -> None:
    seen = visit(browser, f"{writer}/services/{service.id}", wait_for="[data-actions]:not([hidden])")
    page = seen.page
    dialog = open_dialog(page, f"act-svc-{service.id[:12]}-remove")
    dialog.get_by_role("button", name="Preview").click()
    dialog.locator(".act-preview li").wait_for()
    assert dialog.locator(".act-preview li").inner_text() == f"service {service.name}"
    apply = dialog.get_by_role("button", name="Apply")
    confirm = dialog.get_by_label(f"Type {service.name} to confirm")
    assert apply.is_disabled()                          # previewed, but the name is not typed
    confirm.fill(service.name[:-1])
    assert apply.is_disabled()                          # a wrong name keeps it disabled
    confirm.fill(service.name)
    assert apply.is_enabled()
    engine.inspect_service(service.id)                  # still there
    apply.click()
    page.wait_for_url(f"{writer}/services", timeout=PAGE_MS)
    with pytest.raises(docker.errors.NotFound):
        engine.inspect_service(service.id)
    assert_clean_after_leaving(seen, f"{writer}/services/{service.id}")
    page.context.close()


def test_a_config_is_created_from_the_list_page(browser: Any, writer: str,  # noqa: F811
                                                 dclient: docker.DockerClient) -> None:
    name = f"dash-act-cfg-{uuid.uuid4().hex[:6]}"
    seen = visit(browser, f"{writer}/configs", wait_for="[data-actions]:not([hidden])")
    page = seen.page
    try:
        dialog = open_dialog(page, "act-create-config")
        dialog.get_by_label("Name").fill(name)
        dialog.get_by_label("Data (text; sent base64-encoded)").fill("listen 80;\nnaïve ✓")
        dialog.get_by_role("button", name="Preview").click()
        dialog.locator(".act-preview pre").wait_for()
        assert f'"Name": "{name}"' in dialog.locator(".act-preview pre").inner_text()
        assert not dclient.configs.list(filters={"name": name})           # the dry run created nothing
        dialog.get_by_role("button", name="Apply").click()
        page.wait_for_url(f"{writer}/configs/*", timeout=PAGE_MS)         # the Location of the 201
        created = dclient.configs.list(filters={"name": name})
        assert len(created) == 1 and page.url.endswith(created[0].id)
        assert created[0].attrs["Spec"]["Data"] == "bGlzdGVuIDgwOwpuYcOvdmUg4pyT"   # the text as UTF-8
        assert_clean_after_leaving(seen, f"{writer}/configs")
    finally:
        for config in dclient.configs.list(filters={"name": name}):
            config.remove()
        page.context.close()


def test_a_write_from_a_stale_page_shows_what_changed(browser: Any, writer: str, service: Any,  # noqa: F811
                                                      docker_host: str, engine: docker.APIClient) -> None:
    seen = visit(browser, f"{writer}/services/{service.id}", wait_for="[data-actions]:not([hidden])")
    page = seen.page
    old = page.evaluate("document.querySelector('main').dataset.etag")
    assert old
    docker_lines(docker_host, "service", "update", "--detach", "--label-add", "dash.changed=yes", service.id)
    until(page, f"document.querySelector('main').dataset.etag !== {old!r}")
    page.evaluate("dispatchEvent(new Event('pagehide'))")   # live.js closes its stream: no refresh from here on
    page.wait_for_timeout(500)                             # (one in flight lands first)
    page.evaluate(f"document.querySelector('main').dataset.etag = {old!r}")   # a page whose refresh lagged
    dialog = open_dialog(page, f"act-svc-{service.id[:12]}-scale")
    dialog.locator("input[name=replicas]").fill("2")
    dialog.get_by_role("button", name="Preview").click()
    dialog.locator(".act-bad", has_text="changed since this page was read (412)").wait_for()
    dialog.locator("details summary", has_text="The object now").click()
    assert "dash.changed" in dialog.locator("details pre").inner_text()      # the object as it is now
    assert dialog.locator("[data-apply]").is_disabled()
    assert spec(engine, service.id)["Mode"]["Replicated"]["Replicas"] == 1
    assert page.evaluate("document.querySelector('main').dataset.etag") != old   # the new state's tag
    dialog.get_by_role("button", name="Preview").click()                         # so a new preview works
    dialog.locator("table.act-diff").wait_for()
    assert dialog.locator("[data-apply]").is_enabled()
    unexpected = [error for error in seen.errors if "412" not in error]   # the browser logs the refused tag
    assert not unexpected, unexpected
    page.context.close()
