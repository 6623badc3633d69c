"""The swarm engine: settings patches (recognised fields, zero = unchanged), versioned updates with their
rotation flags, refusals, and how engine failures become the codes of docs/swarm-and-plugins.md."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.swarm import SECTIONS, SwarmEngine, patched_spec, problem
from app.engine.writes import WriteFailure
from app.errors import ProblemError
from tests.unit.swarm.fakes import FakeCalls, swarm_object

RAFT = SECTIONS["/swarm/raft"]
ENCRYPTION = SECTIONS["/swarm/encryption"]


def engine(**answers: Any) -> tuple[SwarmEngine, FakeCalls]:
    calls = FakeCalls({("GET", "/swarm"): swarm_object(), ("POST", "/swarm/update"): None,
                       **{tuple(k.split(" ", 1)): v for k, v in answers.items()}})  # type: ignore[misc]
    return SwarmEngine(calls), calls


def test_a_patch_changes_only_recognised_fields_and_zero_means_unchanged() -> None:
    spec = swarm_object()["Spec"]
    new, changed = patched_spec(spec, RAFT, {"SnapshotInterval": 20000, "KeepOldSnapshots": 0,
                                             "LogEntriesForSlowFollowers": None})
    assert changed
    assert new["Raft"] == {**spec["Raft"], "SnapshotInterval": 20000}
    assert spec["Raft"]["SnapshotInterval"] == 10000   # the live spec is not mutated
    assert patched_spec(spec, RAFT, {"SnapshotInterval": 0}) == (spec, False)
    assert patched_spec(spec, RAFT, {"SnapshotInterval": 10000})[1] is False


@pytest.mark.parametrize("patch", [
    {"ElectionTick": 3}, {"SnapshotInterval": -1}, {"SnapshotInterval": "5"}, {"SnapshotInterval": True},
    {"SnapshotInterval": 1.5}, [1], "x"])
def test_bad_patches_are_api006(patch: Any) -> None:
    with pytest.raises(ProblemError) as caught:
        patched_spec(swarm_object()["Spec"], RAFT, patch)
    assert caught.value.code == "API006" and caught.value.status == 400


def test_flags_take_booleans_only() -> None:
    spec = swarm_object()["Spec"]
    new, changed = patched_spec(spec, ENCRYPTION, {"AutoLockManagers": True})
    assert changed and new["EncryptionConfig"]["AutoLockManagers"] is True
    with pytest.raises(ProblemError):
        patched_spec(spec, ENCRYPTION, {"AutoLockManagers": 1})


def test_update_sends_the_version_and_the_rotation_flags() -> None:
    swarm, calls = engine()
    swarm.rotate_token("worker")
    update = calls.sent[-1]
    assert (update.method, update.path) == ("POST", "/swarm/update")
    assert update.params == {"version": 10, "rotateWorkerToken": "true"}
    assert update.body == swarm_object()["Spec"]
    swarm.rotate_token("manager")
    assert calls.sent[-1].params == {"version": 10, "rotateManagerToken": "true"}


def test_force_rotate_ca_bumps_force_rotate() -> None:
    swarm, calls = engine()
    swarm.force_rotate_ca()
    assert calls.sent[-1].body["CAConfig"] == {"NodeCertExpiry": 7776000000000000, "ForceRotate": 1}


def test_unlock_key_rotation_needs_autolock() -> None:
    swarm, calls = engine()
    with pytest.raises(ProblemError) as caught:
        swarm.rotate_unlock_key()
    assert (caught.value.code, caught.value.status) == ("SWM007", 409)
    assert ("POST", "/swarm/update") not in calls.paths()
    swarm, calls = engine(**{"GET /swarm": swarm_object(autolock=True)})
    swarm.rotate_unlock_key()
    assert calls.sent[-1].params == {"version": 10, "rotateManagerUnlockKey": "true"}


def test_an_empty_unlock_key_is_swm009() -> None:
    swarm, _ = engine(**{"GET /swarm/unlockkey": {"UnlockKey": ""}})
    with pytest.raises(ProblemError) as caught:
        swarm.unlock_key()
    assert (caught.value.code, caught.value.status) == ("SWM009", 409)
    swarm, _ = engine(**{"GET /swarm/unlockkey": {"UnlockKey": "SWMKEY-1-abc"}})
    assert swarm.unlock_key() == "SWMKEY-1-abc"


@pytest.mark.parametrize(("failure", "code", "status"), [
    (WriteFailure("out_of_sequence", "update out of sequence"), "SWM012", 409),
    (WriteFailure("unavailable", "This node is not a swarm manager."), "SWM001", 501),
    (WriteFailure("unavailable", "connection refused"), "ENG001", 503),
    (WriteFailure("invalid", "heartbeat time period cannot be a negative duration"), "ENG003", 400),
    (WriteFailure("exists", "swarm is not locked"), "SWM006", 409),
    (WriteFailure("failed", "boom"), "SWM006", 500),
])
def test_failures_map_to_the_reference_codes(failure: WriteFailure, code: str, status: int) -> None:
    found = problem(failure, "SWM006", what="x")
    assert (found.code, found.status) == (code, status)


def test_a_wrong_unlock_key_is_an_unlock_failure() -> None:
    swarm, _ = engine(**{"POST /swarm/unlock": WriteFailure("invalid", "invalid key")})
    with pytest.raises(ProblemError) as caught:
        swarm.unlock("SWMKEY-1-wrong")
    assert (caught.value.code, caught.value.status) == ("SWM008", 400)


def test_inspect_failures() -> None:
    swarm, _ = engine(**{"GET /swarm": WriteFailure("failed", "boom")})
    with pytest.raises(ProblemError) as caught:
        swarm.inspect()
    assert caught.value.code == "SWM002"
    stale, _ = engine(**{"POST /swarm/update": WriteFailure("out_of_sequence", "rpc error: update out of sequence")})
    with pytest.raises(ProblemError) as caught:
        stale.update(3, {})
    assert (caught.value.code, caught.value.status) == ("SWM012", 409)
