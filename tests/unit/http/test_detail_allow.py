"""``Allow`` / ``Accept-Patch`` on a detail (docs/writes.md): GET and HEAD plus the write methods
of the object's whole family (its own URL and its sub-resources), each gated by the operations level and the
caller's ACL; sub-resources keep their own; OPTIONS says what GET says; the detail's Allow matches what the
writes it names actually do (a method it lists is let through, one it leaves out is refused)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.http.allow import DETAIL_RULES, _family
from app.writes.operations import JSON_PATCH, MERGE_PATCH
from tests.unit.acl.test_enforcement_writes import RecordingWriter, as_user, start
from tests.unit.objects import CFG_SHOP, NET_SHOP, NODE_MANAGER, NODE_WORKER, SEC_SHOP, SVC_WEB, TASK_WEB_1
from tests.unit.support import Harness

BOTH = f"{JSON_PATCH}, {MERGE_PATCH}"
# url → {level: (Allow, Accept-Patch)}: docs/writes.md with the table's tiers (node labels 2, task removal 1)
EXPECTED: dict[str, dict[int, tuple[str, str | None]]] = {
    f"/services/{SVC_WEB}": {0: ("GET, HEAD", None), 1: ("GET, HEAD, POST, PUT", None),
                             2: ("GET, HEAD, POST, PUT, PATCH", BOTH),
                             3: ("GET, HEAD, POST, PUT, PATCH, DELETE", BOTH)},
    f"/nodes/{NODE_WORKER}": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD, PUT, PATCH", BOTH),
                              3: ("GET, HEAD, PUT, PATCH, DELETE", BOTH)},
    f"/configs/{CFG_SHOP}": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD, PUT, PATCH", BOTH),
                             3: ("GET, HEAD, PUT, PATCH, DELETE", BOTH)},
    f"/secrets/{SEC_SHOP}": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD, PUT, PATCH", BOTH),
                             3: ("GET, HEAD, PUT, PATCH, DELETE", BOTH)},
    f"/tasks/{TASK_WEB_1}": {0: ("GET, HEAD", None), 1: ("GET, HEAD, DELETE", None),
                             2: ("GET, HEAD, DELETE", None), 3: ("GET, HEAD, DELETE", None)},
    f"/networks/{NET_SHOP}": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD", None),
                              3: ("GET, HEAD, DELETE", None)},
    "/stacks/shop": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD", None),
                     3: ("GET, HEAD, DELETE", None)},
    "/swarm": {0: ("GET, HEAD", None), 1: ("GET, HEAD", None), 2: ("GET, HEAD, PATCH", MERGE_PATCH),
               3: ("GET, HEAD, POST, PATCH", MERGE_PATCH)},
}


@pytest.fixture(params=[0, 1, 2, 3])
def level_lab(request: pytest.FixtureRequest) -> Iterator[tuple[int, Harness]]:
    harness, _ = start(level=request.param, policy=None, mode="none")
    yield request.param, harness
    harness.stop()


@pytest.fixture
def lab() -> Iterator[tuple[Harness, RecordingWriter]]:
    harness, writer = start()
    yield harness, writer
    harness.stop()


def headers_of(response: object) -> tuple[str | None, str | None]:
    headers = response.headers  # type: ignore[attr-defined]
    return headers.get("Allow"), headers.get("Accept-Patch")


def test_a_detail_lists_its_familys_writes_at_each_level(level_lab: tuple[int, Harness]) -> None:
    level, harness = level_lab
    client = harness.app.test_client()
    for url, by_level in EXPECTED.items():
        get = client.get(url)
        assert get.status_code == 200, url
        assert headers_of(get) == by_level[level], (url, level)
        assert headers_of(client.options(url)) == by_level[level], (url, level)
        assert headers_of(client.head(url)) == by_level[level], (url, level)


def test_a_missing_plugin_lists_the_plugin_family(level_lab: tuple[int, Harness]) -> None:
    level, harness = level_lab
    response = harness.app.test_client().get("/plugins/t-none")
    expected = {0: "GET, HEAD", 1: "GET, HEAD", 2: "GET, HEAD, POST, PATCH", 3: "GET, HEAD, POST, PATCH, DELETE"}
    assert response.headers["Allow"] == expected[level]
    assert response.headers.get("Accept-Patch") == (MERGE_PATCH if level >= 2 else None)


def test_sub_resources_keep_their_own_allow(level_lab: tuple[int, Harness]) -> None:
    level, harness = level_lab
    client = harness.app.test_client()
    own = {f"/services/{SVC_WEB}/env": "GET, HEAD, PUT, PATCH" if level >= 2 else "GET, HEAD",
           f"/services/{SVC_WEB}/mode": "GET, HEAD, PUT" if level >= 3 else "GET, HEAD",
           f"/nodes/{NODE_WORKER}/labels": "GET, HEAD, PUT, PATCH" if level >= 2 else "GET, HEAD",
           f"/services/{SVC_WEB}/tasks": "GET, HEAD", "/services": "GET, HEAD"}
    for url, allow in own.items():
        assert client.get(url).headers["Allow"] == allow, (url, level)


def test_the_acl_narrows_a_detail_to_the_callers_writes(lab: tuple[Harness, RecordingWriter]) -> None:
    client = lab[0].app.test_client()
    full = "GET, HEAD, POST, PUT, PATCH, DELETE"
    cases = [("bob", "", f"/services/{SVC_WEB}", full, BOTH),          # writes that one service
             ("alice", "", f"/services/{SVC_WEB}", "GET, HEAD", None),  # a reader only
             ("erin", "", f"/nodes/{NODE_WORKER}", "GET, HEAD, PUT, PATCH, DELETE", BOTH),
             ("erin", "", f"/nodes/{NODE_MANAGER}", "GET, HEAD", None),  # her grant is node:worker-*
             ("erin", "", "/swarm", "GET, HEAD, POST, PATCH", MERGE_PATCH),
             ("carol", "ops", f"/configs/{CFG_SHOP}", "GET, HEAD, PUT, PATCH, DELETE", BOTH)]
    for user, groups, url, allow, patch in cases:
        response = client.get(url, headers=as_user(user, groups))
        assert response.status_code == 200, (user, url)
        assert headers_of(response) == (allow, patch), (user, url)
        assert headers_of(client.options(url, headers=as_user(user, groups))) == (allow, patch), (user, url)


def test_what_the_detail_lists_is_what_the_writes_let_through(lab: tuple[Harness, RecordingWriter]) -> None:
    """The peer UI's flow: read the detail's Allow, then scale, set the image and the env."""
    client, writer = lab[0].app.test_client(), lab[1]
    detail = f"/services/{SVC_WEB}"
    for user, may in (("bob", True), ("alice", False)):
        allow = client.get(detail, headers=as_user(user)).headers["Allow"]
        assert ("PUT" in allow) is may and ("PATCH" in allow) is may, user
        headers = {**as_user(user), "Content-Type": "application/json"}
        scale = client.put(f"{detail}/scale", json={"replicas": 2}, headers=headers)
        image = client.put(f"{detail}/image", json={"image": "nginx:1.27"}, headers=headers)
        env = client.patch(f"{detail}/env", data=b'{"A": "1"}',
                           headers={**as_user(user), "Content-Type": MERGE_PATCH})
        codes = [scale.status_code, image.status_code, env.status_code]
        assert all(code == 200 for code in codes) if may else codes == [403, 403, 403], (user, codes)
    assert len([call for call in writer.calls if call[0] == "update"]) == 3


def test_families_are_precomputed_and_cover_every_detail() -> None:
    assert "/services/<id>" in DETAIL_RULES and "/swarm" in DETAIL_RULES and "/plugins/<name>" in DETAIL_RULES
    methods, patch_types = _family("/services/<id>", 2)
    assert [method for method, _ in methods] == ["POST", "PUT", "PATCH"] and set(patch_types) == {JSON_PATCH,
                                                                                                   MERGE_PATCH}
    assert _family("/services/<id>", 2) is _family("/services/<id>", 2)   # cached per (rule, level)
    assert _family("/swarm", 3)[1] == (MERGE_PATCH,)
    assert _family("/configs/<id>", 3)[0][-1][0] == "DELETE"
