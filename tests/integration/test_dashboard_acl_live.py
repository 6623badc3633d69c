"""The dashboard under an ACL, in a real Chromium against the lab (gunicorn at operations level 3, auth mode
headers, a policy): user "viewer" may read only the demo stack's objects and write nothing: the lists show
only those objects and no write control appears on any page; user "operator" reads the same and may write
one service (demo_web): its page shows the service controls (scale among them), a sibling service's page
shows none, and neither may create anything. No console errors; axe passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    visit,
)
from tests.integration.test_dashboard_actions_live import gunicorn_server

pytestmark = pytest.mark.integration
STACK = "demo"           # deployed on every lab by scripts/lab-swarm
WRITABLE = "demo_web"
POLICY = {"grants": [
    {"resources": [f"stack:{STACK}"], "audience": ["user:viewer", "user:operator"], "permissions": ["read"]},
    {"resources": [f"service:{WRITABLE}"], "audience": ["user:operator"], "permissions": ["write"]},
]}


@pytest.fixture(scope="module")
def acl_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from gunicorn_server(docker_host, tmp_path_factory, "acl", SERVICE_OPERATIONS_LEVEL="3",
                               SERVICE_AUTH_MODE="headers", SERVICE_TRUSTED_PROXIES="127.0.0.1/32",
                               SERVICE_AUTH_HEADERS_SUBJECT="X-User", SERVICE_ACL_POLICY=json.dumps(POLICY))


def as_user(user: str) -> dict[str, str]:
    return {"X-User": user}


def items(server: str, user: str, path: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{server}{path}", params={"limit": "200"}, headers={**as_user(user), "Accept":
                                                                                "application/json"}, timeout=10)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["items"]
    return found


def service_ids(server: str, user: str) -> dict[str, str]:
    return {item["Spec"]["Name"]: item["ID"] for item in items(server, user, "/services")}


def assert_clean(seen: Any, left: list[str]) -> None:
    """No console error, except a live refresh of a page in ``left`` cut off by the navigation away from it."""
    errors = [error for error in seen.errors
              if not (error.endswith("net::ERR_ABORTED") and any(error == f"failed: {url} net::ERR_ABORTED"
                                                                 for url in left))]
    assert not errors, "console errors / failed requests:\n" + "\n".join(errors)


def controls(page: Any) -> int:
    return int(page.locator("[data-write], [data-actions], [data-open]").count())


def test_the_viewer_sees_only_the_stack_and_no_control_anywhere(browser: Any, acl_server: str) -> None:  # noqa: F811
    names = service_ids(acl_server, "viewer")
    assert names and all(name.startswith(f"{STACK}_") for name in names), names   # the API narrows
    assert WRITABLE in names
    seen = visit(browser, f"{acl_server}/services", headers=as_user("viewer"))
    page = seen.page
    text = page.locator("main").inner_text()
    assert all(name in text for name in names)
    for other in ("solo", "ops_agent", "ops_probe"):   # services of the lab outside the stack
        assert other not in text
    assert controls(page) == 0
    assert_accessible(page)
    config = next(item for item in items(acl_server, "viewer", "/configs"))
    volume = next(item for item in items(acl_server, "viewer", "/volumes"))
    network = next(item for item in items(acl_server, "viewer", "/networks"))
    task = next(item for item in items(acl_server, "viewer", "/tasks"))
    left = [f"{acl_server}/services"]
    for path in (f"/services/{names[WRITABLE]}", f"/stacks/{STACK}", "/configs", f"/configs/{config['ID']}",
                 "/networks", f"/networks/{network['Id']}", "/volumes", f"/volumes/{volume['Name']}", "/secrets",
                 "/tasks", f"/tasks/{task['ID']}", "/stacks"):
        left.append(f"{acl_server}{path}")
        answer = page.goto(f"{acl_server}{path}", wait_until="load")
        page.wait_for_selector("main")
        assert answer is not None and answer.status == 200, path   # a page the viewer reads, not a refusal
        assert controls(page) == 0, path
    for item in items(acl_server, "viewer", "/configs") + items(acl_server, "viewer", "/networks"):
        labels = item.get("Spec", {}).get("Labels") or item.get("Labels") or {}
        assert labels.get("com.docker.stack.namespace") == STACK, item   # only the stack's objects listed
    assert_clean(seen, left)
    page.context.close()


def test_the_operator_sees_scale_on_its_one_service_only(browser: Any, acl_server: str) -> None:  # noqa: F811
    names = service_ids(acl_server, "operator")
    seen = visit(browser, f"{acl_server}/services/{names[WRITABLE]}", headers=as_user("operator"),
                 wait_for="[data-actions]:not([hidden])")
    page = seen.page
    short = names[WRITABLE][:12]
    scale = page.locator(f"button[data-open='act-svc-{short}-scale']")
    assert scale.is_visible()
    methods = {form.get_attribute("data-method") + " " + form.get_attribute("data-url").rsplit("/", 1)[-1]
               for form in page.locator("form[data-write]").all()}
    assert "PUT scale" in methods and "DELETE " + names[WRITABLE] in methods
    allow = requests.get(f"{acl_server}/services/{names[WRITABLE]}", timeout=10,
                         headers={**as_user("operator"), "Accept": "application/json"}).headers["Allow"]
    assert "PUT" in allow and "DELETE" in allow      # what the controls show is what Allow says
    scale.click()
    page.locator(f"dialog#act-svc-{short}-scale").wait_for(state="visible")
    assert_accessible(page)                          # with the dialog open
    page.keyboard.press("Escape")
    left = [f"{acl_server}/services/{names[WRITABLE]}"]
    for sibling in (name for name in names if name != WRITABLE):
        left.append(f"{acl_server}/services/{names[sibling]}")
        page.goto(f"{acl_server}/services/{names[sibling]}", wait_until="load")
        page.wait_for_selector("main")
        assert controls(page) == 0, sibling
        allow = requests.get(f"{acl_server}/services/{names[sibling]}", timeout=10,
                             headers={**as_user("operator"), "Accept": "application/json"}).headers["Allow"]
        assert allow == "GET, HEAD", (sibling, allow)
    for path in ("/configs", "/networks", "/volumes", "/secrets", f"/stacks/{STACK}"):   # no create, no removal
        left.append(f"{acl_server}{path}")
        page.goto(f"{acl_server}{path}", wait_until="load")
        page.wait_for_selector("main")
        assert controls(page) == 0, path
    assert_clean(seen, left)
    page.context.close()
