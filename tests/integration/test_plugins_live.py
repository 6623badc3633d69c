"""/plugins against the lab engine. The lab has no registry (no route out of its namespaces), so no plugin
can be installed: what is tested is the listing against the engine's, the missing-plugin paths of every
write, body refusals, an install whose pull the engine fails (answered as a problem, not a traceback), the
privileges of a remote as the engine answers them, the level gate, and Allow at each level."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.conftest import start_runtime_app

pytestmark = pytest.mark.integration
REMOTE = "vieux/sshfs:latest"


def installed(engine: docker.APIClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = engine.plugins()  # type: ignore[no-untyped-call]
    return found


@pytest.fixture(scope="module")
def apps(docker_host: str) -> Iterator[dict[int, Any]]:
    started = {level: start_runtime_app(docker_host, operations_level=level) for level in (1, 2, 3)}
    yield {level: app for level, (app, _) in started.items()}
    for _, runtime in started.values():
        runtime.stop()


def test_the_listing_is_the_engines(apps: dict[int, Any], engine: docker.APIClient) -> None:
    expected = sorted(p["Id"] for p in installed(engine))
    for path in ("/plugins", "/swarm/plugins"):
        response = apps[1].test_client().get(path)
        assert response.status_code == 200
        body = response.get_json()
        assert body["@type"] == "Collection" and body["@id"] == path
        assert sorted(p["Id"] for p in body["items"]) == expected
        assert body["total"] == body["limit"] == len(expected) and body["offset"] == 0


@pytest.mark.parametrize(("level", "allow"), [(1, "GET, HEAD"), (2, "GET, HEAD"), (3, "GET, HEAD, POST")])
def test_allow_on_the_collection(apps: dict[int, Any], level: int, allow: str) -> None:
    response = apps[level].test_client().get("/plugins")
    assert response.headers["Allow"] == allow and "Accept-Patch" not in response.headers
    assert apps[level].test_client().get("/swarm/plugins").headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(("level", "allow"), [(1, "GET, HEAD"), (2, "GET, HEAD, POST, PATCH"),
                                              (3, "GET, HEAD, POST, PATCH, DELETE")])
def test_a_missing_plugin_is_plg004_with_allow(apps: dict[int, Any], level: int, allow: str) -> None:
    response = apps[level].test_client().get("/plugins/t-plg-nope")   # the detail: its family's writes
    assert response.status_code == 404 and response.get_json()["code"] == "PLG004"
    assert response.headers["Allow"] == allow
    assert response.headers.get("Accept-Patch") == (None if level < 2 else "application/merge-patch+json")


@pytest.mark.parametrize(("method", "path", "body", "level"), [
    ("POST", "/plugins/t-plg-nope/enable", None, 2),
    ("POST", "/plugins/t-plg-nope/disable", None, 2),
    ("PATCH", "/plugins/t-plg-nope/settings", {"env": ["A=1"]}, 2),
    ("DELETE", "/plugins/t-plg-nope", None, 3),
    ("DELETE", "/plugins/t-plg-nope?force=true", None, 3),
    ("POST", "/plugins/t-plg-nope/upgrade", {"remote": REMOTE}, 3),
])
def test_writes_to_a_missing_plugin_are_plg004(apps: dict[int, Any], method: str, path: str, body: Any,
                                               level: int) -> None:
    response = apps[level].test_client().open(path, method=method, json=body)
    assert response.status_code == 404, response.get_json()
    assert response.get_json()["code"] == "PLG004"


def test_install_and_privileges_need_a_remote(apps: dict[int, Any]) -> None:
    client = apps[3].test_client()
    for path in ("/plugins", "/plugins/privileges", "/plugins/t-plg-nope/upgrade"):
        for body in (None, {}, {"remote": " "}, {"remote": 5}):
            response = client.post(path, json=body)
            assert response.status_code == 400 and response.get_json()["code"] == "PLG002", (path, body)
    response = client.post("/plugins", json={"remote": REMOTE, "privileges": "all"})
    assert response.status_code == 400 and response.get_json()["code"] == "API006"


def test_an_install_the_engine_cannot_pull_is_a_problem(apps: dict[int, Any], engine: docker.APIClient) -> None:
    before = installed(engine)
    response = apps[3].test_client().post("/plugins", json={"remote": REMOTE, "name": "t-plg-sshfs"})
    assert response.status_code == 500
    assert response.content_type == "application/problem+json"
    problem = response.get_json()
    assert problem["code"] == "ENG004"
    assert REMOTE in problem["detail"] and "Traceback" not in problem["detail"]
    assert installed(engine) == before
    response = apps[3].test_client().post("/plugins/t-plg-nope/upgrade", json={"remote": REMOTE})
    assert response.get_json()["code"] == "PLG004"   # checked before anything is downloaded


def test_privileges_are_the_engines_answer(apps: dict[int, Any], engine: docker.APIClient) -> None:
    response = apps[3].test_client().post("/plugins/privileges", json={"remote": REMOTE})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["@type"] == "PluginPrivileges" and body["@id"] == "/plugins/privileges"
    assert body["privileges"] == engine.plugin_privileges(REMOTE)  # type: ignore[no-untyped-call]


def test_settings_bodies_are_checked_before_the_engine(apps: dict[int, Any]) -> None:
    client = apps[2].test_client()
    bodies: list[Any] = [{"env": "A=1"}, {"env": ["NOEQUALS"]}, {"args": [1]}, {"other": []}, [1]]
    for body in bodies:
        response = client.patch("/plugins/t-plg-nope/settings", json=body)
        assert response.status_code == 400 and response.get_json()["code"] == "API006", body


@pytest.mark.parametrize(("method", "path", "body", "tier"), [
    ("POST", "/plugins/t-plg-nope/enable", None, 2),
    ("POST", "/plugins/t-plg-nope/disable", None, 2),
    ("PATCH", "/plugins/t-plg-nope/settings", {"env": ["A=1"]}, 2),
    ("POST", "/plugins", {"remote": REMOTE}, 3),
    ("POST", "/plugins/privileges", {"remote": REMOTE}, 3),
    ("POST", "/plugins/t-plg-nope/upgrade", {"remote": REMOTE}, 3),
    ("DELETE", "/plugins/t-plg-nope", None, 3),
])
def test_the_level_below_each_tier_is_refused(apps: dict[int, Any], method: str, path: str, body: Any,
                                              tier: int) -> None:
    response = apps[tier - 1].test_client().open(path, method=method, json=body)
    assert response.status_code == 403
    assert response.get_json()["code"] == "OPS001" and response.get_json()["requiredLevel"] == tier
