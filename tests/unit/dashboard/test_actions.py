"""The write controls (templates/macros/actions.html): a control appears exactly when may(<operation>) holds
(operations level, then the ACL), names a write the operation table has (method and URL rule), and carries
what actions.js needs (the object's @id with the base path, the patch type the URL accepts, dry run, wait,
the name to type for a removal)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import render_template_string
from werkzeug.exceptions import MethodNotAllowed, NotFound

from app.http.auth import authenticate_now
from app.writes.dry_run import SUPPORTED
from app.writes.operations import MERGE_PATCH, OPERATIONS, on_rule
from tests.fakes import FakeEngine
from tests.unit.acl.test_enforcement_writes import as_user, start
from tests.unit.objects import CFG_SHOP, NET_SHOP, NODE_WORKER, SVC_DB, SVC_WEB, TASK_WEB_1, VOL_SHOP, cluster
from tests.unit.support import Harness, build_harness

FORM = re.compile(r"<form data-write ([^>]*)>")
ATTR = re.compile(r'data-([a-z-]+)(?:="([^"]*)")?')
SERVICE_WRITES = {("PUT", "scale"), ("PUT", "image"), ("POST", "rollback"), ("POST", "restart"),
                  ("PATCH", "env"), ("PATCH", "labels"), ("DELETE", "")}


@pytest.fixture(scope="module")
def levels() -> Iterator[dict[int, Harness]]:
    """One app per operations level (auth mode none), shared by the module: the tests only render."""
    started = {number: start(level=number, policy=None, mode="none")[0] for number in range(4)}
    yield started
    for harness in started.values():
        harness.stop()


@pytest.fixture(params=[0, 1, 2, 3])
def level(request: pytest.FixtureRequest, levels: dict[int, Harness]) -> tuple[int, Harness]:
    return request.param, levels[request.param]


@pytest.fixture
def level3(levels: dict[int, Harness]) -> tuple[int, Harness]:
    return 3, levels[3]


@pytest.fixture
def level0(levels: dict[int, Harness]) -> tuple[int, Harness]:
    return 0, levels[0]


@pytest.fixture
def acl() -> Iterator[Harness]:
    harness, _ = start(level=3)   # headers mode with the ACL policy of the write-enforcement tests
    yield harness
    harness.stop()


def doc(harness: Harness, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = harness.app.test_client().get(path, headers={"Accept": "application/json", **(headers or {})})
    assert response.status_code == 200, response.get_data(as_text=True)
    body: dict[str, Any] = response.get_json()
    return body


def render(harness: Harness, call: str, headers: dict[str, str] | None = None, context: bool = True,
           **values: Any) -> str:
    """The macro call rendered in a request as the caller of ``headers`` (authenticated as a page is)."""
    source = ('{% import "macros/actions.html" as act' + (" with context" if context else "") + " %}" + call)
    with harness.app.test_request_context("/", headers=headers or {}, environ_base={"REMOTE_ADDR": "127.0.0.1"}):
        if harness.runtime.settings.auth_mode != "none":
            authenticate_now()
        return render_template_string(source, **values)


def forms(html: str) -> list[dict[str, str]]:
    return [{name: value for name, value in ATTR.findall(attrs)} for attrs in FORM.findall(html)]


def writes_of(html: str, prefix: str) -> set[tuple[str, str]]:
    """(method, URL below ``prefix``) of every control."""
    found = set()
    for form in forms(html):
        assert form["url"].startswith(prefix), form
        found.add((form["method"], form["url"].removeprefix(prefix).lstrip("/")))
    return found


def operation_of(harness: Harness, method: str, url: str) -> str:
    """The operation a control's request would run: its URL rule and method in the table."""
    adapter = harness.app.url_map.bind("localhost", script_name=harness.runtime.settings.base_path or None)
    path = url.removeprefix(harness.runtime.settings.base_path)
    try:
        rule, _ = adapter.match(path, method=method, return_rule=True)
    except (NotFound, MethodNotAllowed) as error:
        raise AssertionError(f"{method} {url} is not routed") from error
    ops = [op for op in on_rule(rule.rule) if op.method == method]
    assert ops, f"{method} {rule.rule} is not in the operation table"
    return ops[0].name


def test_level_0_renders_no_control_at_all(level0: tuple[int, Harness]) -> None:
    _, harness = level0
    service = doc(harness, f"/services/{SVC_WEB}")["service"]
    html = render(harness, "{{ act.service(s) }}{{ act.node(n) }}{{ act.task(t) }}{{ act.stack(k) }}"
                           "{{ act.object('config', c) }}{{ act.object('volume', v) }}{{ act.object('network', w) }}"
                           "{{ act.create('config') }}{{ act.create('volume') }}{{ act.swarm({}) }}"
                           "{{ act.plugin({'Name': 'sshfs:latest', 'Enabled': true}) }}",
                  s={**service, "PreviousSpec": service["Spec"]}, n=doc(harness, f"/nodes/{NODE_WORKER}")["node"],
                  t=doc(harness, f"/tasks/{TASK_WEB_1}")["task"], k=doc(harness, "/stacks/shop"),
                  c=doc(harness, f"/configs/{CFG_SHOP}")["config"], v=doc(harness, f"/volumes/{VOL_SHOP}")["volume"],
                  w=doc(harness, f"/networks/{NET_SHOP}")["network"])
    assert "data-write" not in html and "<dialog" not in html and "<button" not in html
    assert "may(" not in html   # nothing half-rendered


def test_service_controls_follow_the_level(level: tuple[int, Harness]) -> None:
    number, harness = level
    service = doc(harness, f"/services/{SVC_WEB}")["service"]
    service = {**service, "PreviousSpec": copy.deepcopy(service["Spec"])}   # rollback needs a previous spec
    found = writes_of(render(harness, "{{ act.service(s) }}", s=service), f"/services/{SVC_WEB}")
    expected = {(m, sub) for m, sub in SERVICE_WRITES
                if OPERATIONS[operation_name(m, sub)].tier <= number}
    assert found == expected
    if number == 3:
        assert found == SERVICE_WRITES   # level 3: every service control
    if number == 0:
        assert found == set()


def operation_name(method: str, sub: str) -> str:
    return {("PUT", "scale"): "scale_service", ("PUT", "image"): "update_service_image",
            ("POST", "rollback"): "rollback_service", ("POST", "restart"): "restart_service",
            ("PATCH", "env"): "patch_service_env", ("PATCH", "labels"): "patch_service_labels",
            ("DELETE", ""): "remove_service"}[(method, sub)]


def test_every_control_is_a_routed_write_of_the_table_with_what_the_script_needs(level3: tuple[int, Harness]
                                                                                ) -> None:
    _, harness = level3
    service = doc(harness, f"/services/{SVC_WEB}")["service"]
    html = render(harness, "{{ act.service(s) }}{{ act.node(n) }}{{ act.task(t) }}{{ act.stack(k) }}"
                           "{{ act.object('config', c) }}{{ act.object('volume', v) }}{{ act.object('network', w) }}"
                           "{% for kind in ('config', 'secret', 'network', 'volume') %}"
                           "{{ act.create(kind) }}{% endfor %}"
                           "{{ act.swarm({'swarm': {'Spec': {'Orchestration': {'TaskHistoryRetentionLimit': 5}}}}) }}",
                  s={**service, "PreviousSpec": service["Spec"]}, n=doc(harness, f"/nodes/{NODE_WORKER}")["node"],
                  t=doc(harness, f"/tasks/{TASK_WEB_1}")["task"], k=doc(harness, "/stacks/shop"),
                  c=doc(harness, f"/configs/{CFG_SHOP}")["config"], v=doc(harness, f"/volumes/{VOL_SHOP}")["volume"],
                  w=doc(harness, f"/networks/{NET_SHOP}")["network"])
    names = set()
    for form in forms(html):
        name = operation_of(harness, form["method"], form["url"])
        names.add(name)
        op = OPERATIONS[name]
        assert ("dry-run" in form) == (name in SUPPORTED), name   # preview by dry run wherever the API has one
        if op.method == "PATCH":
            assert form["type"] == MERGE_PATCH and MERGE_PATCH in op.patch_types   # a type Accept-Patch lists
        if op.method == "DELETE":
            assert form.get("confirm"), name   # a removal needs the name typed
        assert ("wait" in form) == (name in {"scale_service", "update_service_image", "rollback_service",
                                             "restart_service", "patch_service_env", "patch_service_labels"})
    assert names >= {"scale_service", "remove_service", "update_node_availability", "patch_node_labels",
                     "remove_node", "remove_task", "remove_stack", "patch_config_labels", "remove_config",
                     "remove_volume", "remove_network", "create_config", "create_secret", "create_network",
                     "create_volume", "update_swarm_orchestration", "update_swarm_raft", "update_swarm_ca",
                     "update_swarm_encryption"}
    assert 'data-confirm="shop_web_api"' in html and 'data-confirm="shop"' in html
    assert "data-actions hidden" in html   # shown by the script only
    assert html.count('<dialog id="') == len(set(re.findall(r'<dialog id="([^"]+)"', html)))   # ids unique


def test_labels_need_level_2_and_removals_level_3_on_objects(level: tuple[int, Harness]) -> None:
    number, harness = level
    config = doc(harness, f"/configs/{CFG_SHOP}")["config"]
    network = doc(harness, f"/networks/{NET_SHOP}")["network"]
    found = writes_of(render(harness, "{{ act.object('config', c) }}", c=config), f"/configs/{CFG_SHOP}")
    assert found == ({("PATCH", "labels")} if number >= 2 else set()) | ({("DELETE", "")} if number == 3 else set())
    assert writes_of(render(harness, "{{ act.object('network', w) }}", w=network), f"/networks/{NET_SHOP}") == \
        ({("DELETE", "")} if number == 3 else set())
    creates = writes_of(render(harness, "{{ act.create('secret') }}"), "/secrets")
    assert creates == ({("POST", "")} if number >= 2 else set())
    task = doc(harness, f"/tasks/{TASK_WEB_1}")["task"]
    assert writes_of(render(harness, "{{ act.task(t) }}", t=task), f"/tasks/{TASK_WEB_1}") == \
        ({("DELETE", "")} if number >= 1 else set())


def test_the_acl_decides_per_object(acl: Harness) -> None:
    bob = as_user("bob")       # read and write on service:shop_web_api only
    alice = as_user("alice")   # read on stack:shop, no write
    web = doc(acl, f"/services/{SVC_WEB}", bob)["service"]
    assert writes_of(render(acl, "{{ act.service(s) }}", bob, s=web), f"/services/{SVC_WEB}") == \
        SERVICE_WRITES - {("POST", "rollback")}   # no PreviousSpec on this one
    db = doc(acl, f"/services/{SVC_DB}", alice)["service"]
    assert forms(render(acl, "{{ act.service(s) }}", bob, s=db)) == []
    assert forms(render(acl, "{{ act.service(s) }}{{ act.stack(k) }}", alice, s=web,
                        k=doc(acl, "/stacks/shop", alice))) == []
    assert forms(render(acl, "{{ act.create('config') }}", alice)) == []
    assert writes_of(render(acl, "{{ act.create('config') }}", as_user("carol", "ops")), "/configs") == {("POST", "")}


def test_urls_carry_the_base_path() -> None:
    based = build_harness(FakeEngine(cluster()), operations_level=3, base_path="/shoal")
    based.start()
    try:
        service = doc(based, f"/shoal/services/{SVC_WEB}")["service"]
        html = render(based, "{{ act.service(s) }}{{ act.create('volume') }}", s=service)
        urls = {form["url"] for form in forms(html)}
        assert f"/shoal/services/{SVC_WEB}/scale" in urls and "/shoal/volumes" in urls
        assert all(url.startswith("/shoal/") for url in urls)
        assert 'data-after="/shoal/services"' in html
    finally:
        based.stop()


def test_controls_render_when_imported_without_context(level3: tuple[int, Harness]) -> None:
    """The detail pages import the macros without context: may() and base must be Jinja globals then
    (app.dashboard.context); else every control is silently absent."""
    _, harness = level3
    service = doc(harness, f"/services/{SVC_WEB}")["service"]
    html = render(harness, "{{ act.service(s) }}", context=False, s=service)
    assert ("PUT", "scale") in writes_of(html, f"/services/{SVC_WEB}")
