"""The /swarm and /plugins views over scripted engines: join tokens by level, the settings answer, a patch
that changes nothing writes nothing, installs (201 + Location), settings, and the answers' @id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.blueprints import plugins as plugin_views
from app.blueprints import swarm as swarm_views
from app.engine.plugins import PluginEngine
from app.engine.swarm import SwarmEngine
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness
from tests.unit.swarm.fakes import FakeCalls, swarm_object

MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def harnesses() -> Iterator[dict[int, Harness]]:
    built = {level: build_harness(FakeEngine(cluster()), operations_level=level) for level in (2, 3)}
    for harness in built.values():
        harness.start()
    yield built
    for harness in built.values():
        harness.stop()


def scripted(harness: Harness, **answers: Any) -> FakeCalls:
    calls = FakeCalls({("GET", "/swarm"): swarm_object(), ("POST", "/swarm/update"): None,
                       **{tuple(k.split(" ", 1)): v for k, v in answers.items()}})  # type: ignore[misc]
    harness.app.extensions[swarm_views.ENGINE_KEY] = SwarmEngine(calls)
    harness.app.extensions[plugin_views.ENGINE_KEY] = PluginEngine(calls)
    return calls


def test_join_tokens_are_blank_below_level_3(harnesses: dict[int, Harness]) -> None:
    for level, expected in ((2, {"Worker": "", "Manager": ""}), (3, swarm_object()["JoinTokens"])):
        scripted(harnesses[level])
        response = harnesses[level].app.test_client().get("/swarm")
        body = response.get_json()
        assert response.status_code == 200
        assert body["@type"] == "Swarm" and body["@id"] == "/swarm"
        assert body["swarm"]["JoinTokens"] == expected
        assert body["managerAddr"] == "10.0.0.1:2377"
        assert response.headers["Last-Modified"] == "Wed, 25 Nov 2026 17:08:06 GMT"


def test_a_settings_patch_answers_the_section_read_back(harnesses: dict[int, Harness]) -> None:
    harness = harnesses[3]
    calls = scripted(harness)
    response = harness.app.test_client().patch("/swarm/dispatcher", data=json.dumps({"HeartbeatPeriod": 6000000000}),
                                               content_type=MERGE)
    assert response.status_code == 200
    assert response.get_json()["@type"] == "SwarmDispatcher"
    update = next(s for s in calls.sent if s.path == "/swarm/update")
    assert update.params == {"version": 10} and update.body["Dispatcher"] == {"HeartbeatPeriod": 6000000000}


def test_a_patch_that_changes_nothing_writes_nothing(harnesses: dict[int, Harness]) -> None:
    harness = harnesses[3]
    calls = scripted(harness)
    client = harness.app.test_client()
    response = client.patch("/swarm/raft", data=json.dumps({"SnapshotInterval": 0}), content_type=MERGE,
                            headers={"Prefer": "return=minimal"})
    assert response.status_code == 204 and response.headers["Preference-Applied"] == "return=minimal"
    assert ("POST", "/swarm/update") not in calls.paths()
    asked = len(calls.sent)
    response = client.patch("/swarm/raft", json={"SnapshotInterval": 1})
    assert response.status_code == 415 and response.headers["Accept-Patch"] == MERGE
    response = client.patch("/swarm/raft", data=json.dumps({"Nope": 1}), content_type=MERGE)
    assert response.status_code == 400 and response.get_json()["code"] == "API006"
    assert len(calls.sent) == asked   # a bad patch is refused before the engine is asked


def test_install_answers_201_with_location(harnesses: dict[int, Harness]) -> None:
    harness = harnesses[3]
    installed = {"Id": "f00d", "Name": "vieux/sshfs:latest", "Enabled": True, "Settings": {}, "Config": {}}
    calls = scripted(harness, **{"GET /plugins/privileges": [], "POST /plugins/pull": "",
                                 "POST /plugins/vieux/sshfs:latest/enable": None,
                                 "GET /plugins/vieux/sshfs:latest/json": installed})
    response = harness.app.test_client().post("/plugins", json={"remote": "vieux/sshfs:latest"})
    assert response.status_code == 201, response.get_json()
    assert response.headers["Location"] == "/plugins/f00d"   # a name with a slash: addressed by id
    assert response.get_json()["plugin"]["Name"] == "vieux/sshfs:latest"
    assert ("POST", "/plugins/pull") in calls.paths()


def test_settings_set_env_and_the_plugins_args(harnesses: dict[int, Harness]) -> None:
    harness = harnesses[2]
    found = {"Id": "f00d", "Name": "sshfs:latest", "Enabled": False, "Settings": {},
             "Config": {"Args": {"Name": "opts", "Settable": ["value"]}}}
    calls = scripted(harness, **{"GET /plugins/sshfs/json": found, "POST /plugins/sshfs/set": None})
    response = harness.app.test_client().patch("/plugins/sshfs/settings",
                                               json={"env": ["DEBUG=1"], "args": ["-o", "ro"]})
    assert response.status_code == 200
    assert response.get_json()["@id"] == "/plugins/sshfs:latest"
    assert next(s for s in calls.sent if s.path == "/plugins/sshfs/set").body == ["DEBUG=1", "opts=-o ro"]
    response = harness.app.test_client().patch("/plugins/sshfs/settings", json={"env": ["NOEQUALS"]})
    assert response.status_code == 400 and response.get_json()["code"] == "API006"
