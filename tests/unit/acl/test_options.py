"""OPTIONS (``app.http.options``): authenticated like any other method outside the bypassed paths, and its
``Allow``/``Accept-Patch`` are the caller's (operations level, then the ACL write check), exactly those of
a GET of the same URL; write-only URLs list only what the caller may do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.unit.acl.test_enforcement_writes import RecordingWriter, as_user, start
from tests.unit.objects import CFG_SHOP, NODE_MANAGER, NODE_WORKER, SVC_WEB, TASK_WEB_1
from tests.unit.support import Harness

READ_URLS = ["/services", f"/services/{SVC_WEB}", f"/services/{SVC_WEB}/labels", f"/services/{SVC_WEB}/env",
             f"/nodes/{NODE_WORKER}", f"/nodes/{NODE_WORKER}/labels", f"/nodes/{NODE_MANAGER}/labels", "/configs",
             f"/configs/{CFG_SHOP}", f"/tasks/{TASK_WEB_1}", "/cluster", "/cluster/capacity", "/history",
             "/stacks/shop", "/swarm", "/topology", "/recommendations", "/search?q=a"]
USERS = [("alice", ""), ("bob", ""), ("carol", "ops"), ("erin", ""), ("frank", ""), ("nobody", "")]


@pytest.fixture
def lab() -> Iterator[tuple[Harness, RecordingWriter]]:
    harness, writer = start()
    yield harness, writer
    harness.stop()


def headers_of(response: Any) -> tuple[str | None, str | None]:
    return response.headers.get("Allow"), response.headers.get("Accept-Patch")


@pytest.mark.parametrize("url", READ_URLS)
def test_options_allow_is_the_callers_and_equals_gets(lab: tuple[Harness, RecordingWriter], url: str) -> None:
    client: FlaskClient = lab[0].app.test_client()
    for user, groups in USERS:
        options = client.options(url, headers=as_user(user, groups))
        assert options.status_code == 200 and options.get_data() == b""
        get = client.get(url, headers=as_user(user, groups))
        if get.status_code == 200:
            assert headers_of(options) == headers_of(get), (url, user)
        assert "Authorization" in options.headers.get("Vary", "")


def test_options_never_advertises_what_the_caller_may_not_do(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    assert client.options(f"/services/{SVC_WEB}", headers=as_user("alice")).headers["Allow"] == "GET, HEAD"
    detail = client.options(f"/services/{SVC_WEB}", headers=as_user("bob"))   # the family's (docs/writes.md)
    assert detail.headers["Allow"] == "GET, HEAD, POST, PUT, PATCH, DELETE" and detail.headers["Accept-Patch"]
    scale = f"/services/{SVC_WEB}/scale"          # a write-only URL: nothing for a reader
    assert client.options(scale, headers=as_user("alice")).headers["Allow"] == ""
    assert client.options(scale, headers=as_user("bob")).headers["Allow"] == "PUT"
    labels = client.options(f"/services/{SVC_WEB}/labels", headers=as_user("alice"))
    assert labels.headers["Allow"] == "GET, HEAD" and "Accept-Patch" not in labels.headers
    writer = client.options(f"/services/{SVC_WEB}/labels", headers=as_user("bob"))
    assert writer.headers["Allow"] == "GET, HEAD, PUT, PATCH" and "merge-patch" in writer.headers["Accept-Patch"]
    assert "POST" not in client.options("/configs", headers=as_user("bob")).headers["Allow"]
    assert "POST" in client.options("/configs", headers=as_user("carol", "ops")).headers["Allow"]


@pytest.mark.parametrize("url", ["/services", f"/services/{SVC_WEB}", f"/services/{SVC_WEB}/scale", "/cluster",
                                 "/history", "/history/1", "/events", "/nowhere"])
def test_options_without_credentials_is_401(lab: tuple[Harness, RecordingWriter], url: str) -> None:
    response = lab[0].app.test_client().options(url, environ_base={"REMOTE_ADDR": "127.0.0.2"})
    assert response.status_code == 401 and response.get_json()["code"] == "AUT001"
    assert "Allow" not in response.headers and response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("url", ["/-/health", "/-/ready", "/api", "/api/errors", "/auth/whoami"])
def test_options_on_bypassed_paths_needs_no_credentials(lab: tuple[Harness, RecordingWriter], url: str) -> None:
    response = lab[0].app.test_client().options(url, environ_base={"REMOTE_ADDR": "127.0.0.2"})
    assert response.status_code == 200 and response.headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(("level", "scale"), [(0, ""), (1, "PUT"), (3, "PUT")])
def test_options_follows_the_operations_level_in_mode_none(level: int, scale: str) -> None:
    harness, _ = start(level=level, policy=None, mode="none")
    try:
        client = harness.app.test_client()
        assert client.options(f"/services/{SVC_WEB}/scale").headers["Allow"] == scale
        detail = client.options(f"/services/{SVC_WEB}").headers["Allow"]
        assert detail == {0: "GET, HEAD", 1: "GET, HEAD, POST, PUT", 3: "GET, HEAD, POST, PUT, PATCH, DELETE"}[level]
        assert detail == client.get(f"/services/{SVC_WEB}").headers["Allow"]
    finally:
        harness.stop()


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "POST"])
def test_stacks_summary_is_405_with_its_own_allow_and_never_removes_a_stack(method: str) -> None:
    harness, writer = start(level=3, policy=None, mode="none")
    try:
        client = harness.app.test_client()
        response = client.open("/stacks/summary", method=method)
        assert response.status_code == 405 and response.mimetype == "application/problem+json"
        assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "HEAD", "OPTIONS"}
        assert client.options("/stacks/summary").headers["Allow"] == "GET, HEAD"
        assert client.get("/stacks/summary").headers["Allow"] == "GET, HEAD"
        assert writer.calls == []
        assert client.options("/stacks/shop").headers["Allow"] == "GET, HEAD, DELETE"   # other names unchanged
        assert client.delete("/stacks/summary-2").get_json()["code"] == "STK001"          # only the exact name
    finally:
        harness.stop()
