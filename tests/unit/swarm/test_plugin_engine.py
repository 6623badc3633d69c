"""The plugin engine against a scripted engine: the registry paths the lab cannot exercise (install with
privileges, pull, enable; upgrade; an error at the end of a pull stream) and the failure codes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engine.plugins import PULL_TIMEOUT, PluginEngine, stream_error
from app.engine.writes import WriteFailure
from app.errors import ProblemError
from tests.unit.swarm.fakes import FakeCalls

PRIVILEGES = [{"Name": "network", "Description": "", "Value": ["host"]}]
PROGRESS = "\n".join(json.dumps(m) for m in ({"status": "Downloading"}, {"status": "Digest: sha256:x"}))


def plugin(name: str = "sshfs:latest", enabled: bool = True) -> dict[str, Any]:
    return {"Id": "abc123", "Name": name, "Enabled": enabled, "Settings": {"Env": []},
            "Config": {"Args": {"Name": "args", "Settable": ["value"], "Value": []}}}


def test_install_grants_the_asked_privileges_pulls_enables_and_inspects() -> None:
    calls = FakeCalls({("GET", "/plugins/privileges"): PRIVILEGES, ("POST", "/plugins/pull"): PROGRESS,
                       ("POST", "/plugins/sshfs/enable"): None, ("GET", "/plugins/sshfs/json"): plugin()})
    installed = PluginEngine(calls).install("vieux/sshfs:latest", "sshfs", None, enable=True)
    assert installed["Name"] == "sshfs:latest"
    assert calls.paths() == [("GET", "/plugins/privileges"), ("POST", "/plugins/pull"),
                             ("POST", "/plugins/sshfs/enable"), ("GET", "/plugins/sshfs/json")]
    pull = calls.sent[1]
    assert pull.params == {"remote": "vieux/sshfs:latest", "name": "sshfs"}
    assert pull.body == PRIVILEGES and pull.raw and pull.timeout == PULL_TIMEOUT


def test_install_with_given_privileges_and_disabled_skips_those_calls() -> None:
    calls = FakeCalls({("POST", "/plugins/pull"): "", ("GET", "/plugins/x:1/json"): plugin("x:1", False)})
    PluginEngine(calls).install("x:1", None, [], enable=False)
    assert calls.paths() == [("POST", "/plugins/pull"), ("GET", "/plugins/x:1/json")]
    assert calls.sent[0].params == {"remote": "x:1"} and calls.sent[0].body == []


def test_an_error_at_the_end_of_the_pull_stream_is_a_problem() -> None:
    failing = PROGRESS + "\n" + json.dumps({"errorDetail": {"message": "unauthorized"}, "error": "unauthorized"})
    assert stream_error(failing) == "unauthorized"
    assert stream_error(PROGRESS) is None and stream_error("not json\n") is None
    calls = FakeCalls({("GET", "/plugins/privileges"): [], ("POST", "/plugins/pull"): failing})
    with pytest.raises(ProblemError) as caught:
        PluginEngine(calls).install("x:1", None, None, enable=True)
    assert caught.value.code == "ENG004" and "unauthorized" in caught.value.detail
    assert ("POST", "/plugins/x:1/enable") not in calls.paths()


def test_upgrade_posts_to_the_plugin_with_the_remote() -> None:
    calls = FakeCalls({("GET", "/plugins/privileges"): PRIVILEGES, ("POST", "/plugins/sshfs:latest/upgrade"): "",
                       ("GET", "/plugins/sshfs:latest/json"): plugin()})
    PluginEngine(calls).upgrade("sshfs:latest", "vieux/sshfs:next", None)
    upgrade = calls.sent[1]
    assert upgrade.params == {"remote": "vieux/sshfs:next"} and upgrade.body == PRIVILEGES


@pytest.mark.parametrize(("failure", "code", "status"), [
    (WriteFailure("not_found", 'plugin "nope" not found'), "PLG004", 404),
    (WriteFailure("exists", "plugin sshfs:latest is already enabled"), "ENG003", 409),
    (WriteFailure("in_use", "plugin is in use"), "ENG003", 409),
    (WriteFailure("unavailable", "connection refused"), "ENG001", 503),
    (WriteFailure("failed", "error resolving plugin reference"), "ENG004", 500),
])
def test_failures(failure: WriteFailure, code: str, status: int) -> None:
    calls = FakeCalls({("POST", "/plugins/sshfs/enable"): failure})
    with pytest.raises(ProblemError) as caught:
        PluginEngine(calls).enable("sshfs")
    assert (caught.value.code, caught.value.status) == (code, status)


def test_listing_and_privileges_failures_have_their_codes() -> None:
    calls = FakeCalls({("GET", "/plugins"): WriteFailure("failed", "x"),
                       ("GET", "/plugins/privileges"): WriteFailure("failed", "y")})
    with pytest.raises(ProblemError) as listing:
        PluginEngine(calls).all()
    with pytest.raises(ProblemError) as privileges:
        PluginEngine(calls).privileges("x:1")
    assert listing.value.code == "PLG001" and privileges.value.code == "PLG003"
