"""The swarm object: inspect, versioned spec updates (settings, token/unlock-key/CA rotation), unlock.

Why not the cache: the engine emits no swarm events, so the swarm object is read from the engine per
request (cheap: one local socket round-trip), and every write is based on that fresh read. Each update
carries the swarm's ``Version.Index``: a change made meanwhile by anyone makes the engine refuse it ("update
out of sequence"), answered 409 ``SWM012`` — re-read and retry.

Engine calls time out after 5 s (docs/swarm-and-plugins.md). Failures become problems with these codes:
not a manager → 501 ``SWM001``; engine unreachable → 503 ``ENG001``; arguments refused → 400
``ENG003``; otherwise the operation's own code (``SWM002`` inspect, ``SWM003`` update, ``SWM006`` token,
``SWM007`` unlock key, ``SWM008`` unlock, ``SWM009`` reading the unlock key), with 409 when the engine says the
swarm is in the wrong state for it (e.g. unlocking a swarm that is not locked).

:class:`EngineCalls` is the transport shared with :mod:`app.engine.plugins`: one low-level client per app,
every failure classified by :func:`app.engine.writes.classify`; unit tests replace :meth:`EngineCalls.send`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from app.engine.writes import EngineWriter, WriteFailure, outcome_unknown
from app.errors import ProblemError

Raw = dict[str, Any]
TIMEOUT = 5.0
_NOT_MANAGER = ("not a swarm manager", "not part of a swarm")


class EngineCalls(EngineWriter):
    """The engine writer with a 5 s timeout for swarm and plugin calls (``call`` takes a longer
    one per request, and ``raw`` for streamed answers such as plugin pulls)."""

    def __init__(self, base_url: str, api_version: str = "1.41", timeout: float = TIMEOUT) -> None:
        super().__init__(base_url, api_version, timeout)


def problem(failure: WriteFailure, code: str, *, what: str, own_invalid: bool = False) -> ProblemError:
    """An engine failure as a problem; ``code`` is the operation's own failure code (with the
    engine's 400 too when ``own_invalid``: a wrong unlock key is an unlock failure, not a bad argument)."""
    detail = f"The engine refused {what}: {failure.message}"
    lowered = failure.message.lower()
    if any(marker in lowered for marker in _NOT_MANAGER):
        return ProblemError("SWM001", detail=detail)
    if failure.reason == "unknown":   # sent, then no answer: it may have been applied (ENG005, 504)
        return outcome_unknown(what, failure, [], retry_safe=False)
    if failure.reason == "unavailable":
        return ProblemError("ENG001", detail=detail, headers={"Retry-After": "1"})
    if failure.reason == "out_of_sequence":
        return ProblemError("SWM012", detail=f"The swarm changed since it was read ({failure.message}); "
                                                          "re-read /swarm and retry.")
    if failure.reason == "invalid":
        return ProblemError(code, status=400, detail=detail) if own_invalid else ProblemError("ENG003", detail=detail)
    if failure.reason in ("exists", "in_use"):   # the engine's 409: the swarm is in the wrong state for it
        return ProblemError(code, status=409, detail=detail)
    return ProblemError(code, detail=detail)


# ---------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True, slots=True)
class Section:
    """One PATCH-able part of the swarm spec: where it lives, how it is answered, what may change."""

    rule: str            # URL path
    operation: str       # row of app.writes.operations
    spec_key: str        # member of Swarm.Spec
    answer_key: str      # member of the answer document
    jsonld_type: str
    counters: tuple[str, ...] = ()   # non-negative integers; 0 (or null) means unchanged
    flags: tuple[str, ...] = ()      # booleans; null means unchanged

    @property
    def fields(self) -> tuple[str, ...]:
        return self.counters + self.flags


SECTIONS: dict[str, Section] = {s.rule: s for s in (
    Section("/swarm/orchestration", "update_swarm_orchestration", "Orchestration", "orchestration",
            "SwarmOrchestration", counters=("TaskHistoryRetentionLimit",)),
    Section("/swarm/raft", "update_swarm_raft", "Raft", "raft", "SwarmRaft",
            counters=("SnapshotInterval", "KeepOldSnapshots", "LogEntriesForSlowFollowers")),
    Section("/swarm/dispatcher", "update_swarm_dispatcher", "Dispatcher", "dispatcher", "SwarmDispatcher",
            counters=("HeartbeatPeriod",)),
    Section("/swarm/ca", "update_swarm_ca", "CAConfig", "caConfig", "SwarmCa", counters=("NodeCertExpiry",)),
    Section("/swarm/encryption", "update_swarm_encryption", "EncryptionConfig", "encryption", "SwarmEncryption",
            flags=("AutoLockManagers",)),
)}


def patched_spec(spec: Raw, section: Section, patch: Any) -> tuple[Raw, bool]:
    """(new spec, changed?): a merge patch over the section's recognised fields of the live spec. Zero
    counters and nulls leave a field unchanged (docs/swarm-and-plugins.md); unknown fields and wrong types are 400
    ``API006`` (nothing is written)."""
    if not isinstance(patch, dict):
        raise ProblemError("API006", detail="A swarm settings patch is a JSON object.")
    unknown = sorted(set(patch) - set(section.fields))
    if unknown:
        raise ProblemError("API006", detail=f"Unknown field(s) {', '.join(unknown)}; {section.rule} accepts "
                                            f"{', '.join(section.fields)}.")
    new = copy.deepcopy(spec)
    part = new.setdefault(section.spec_key, {})
    if not isinstance(part, dict):
        part = new[section.spec_key] = {}
    changed = False
    for name, value in patch.items():
        if value is None:
            continue
        if name in section.counters:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ProblemError("API006", detail=f"{name} must be a non-negative integer (0 leaves it "
                                                    f"unchanged), not {value!r}.")
            if value == 0:
                continue
        elif not isinstance(value, bool):
            raise ProblemError("API006", detail=f"{name} must be true or false, not {value!r}.")
        if part.get(name) != value:
            part[name] = value
            changed = True
    return new, changed


# ---------------------------------------------------------------------------------------------- engine
class SwarmEngine:
    """The swarm calls Shoal makes (``docker swarm update|unlock|unlock-key|ca`` over the API)."""

    def __init__(self, calls: EngineCalls) -> None:
        self.calls = calls

    def inspect(self) -> Raw:
        try:
            found = self.calls.call("GET", "/swarm")
        except WriteFailure as failure:
            raise problem(failure, "SWM002", what="the swarm inspect") from None
        if not isinstance(found, dict):
            raise ProblemError("SWM002", detail="The engine's swarm answer is not an object.")
        return found

    def update(self, version: int, spec: Raw, *, code: str = "SWM003", what: str = "the swarm update",
               **rotate: bool) -> None:
        """``POST /swarm/update?version=N`` with ``rotateWorkerToken`` / ``rotateManagerToken`` /
        ``rotateManagerUnlockKey`` as asked (keyword arguments of those names)."""
        params: dict[str, Any] = {"version": version}
        params.update({name: "true" for name, wanted in rotate.items() if wanted})
        try:
            self.calls.call("POST", "/swarm/update", params=params, body=spec)
        except WriteFailure as failure:
            raise problem(failure, code, what=what) from None

    def version_and_spec(self) -> tuple[int, Raw]:
        swarm = self.inspect()
        return int((swarm.get("Version") or {}).get("Index") or 0), dict(swarm.get("Spec") or {})

    def rotate_token(self, target: str) -> None:
        version, spec = self.version_and_spec()
        flag = "rotateWorkerToken" if target == "worker" else "rotateManagerToken"
        self.update(version, spec, code="SWM006", what=f"the {target} join-token rotation", **{flag: True})

    def rotate_unlock_key(self) -> None:
        """Refused (409 ``SWM007``) while autolock is off: the engine would accept it and do nothing."""
        version, spec = self.version_and_spec()
        if not (spec.get("EncryptionConfig") or {}).get("AutoLockManagers"):
            raise ProblemError("SWM007", status=409, detail="Autolock is off, so there is no unlock key to rotate; "
                                                            "turn it on with PATCH /swarm/encryption first.")
        self.update(version, spec, code="SWM007", what="the unlock-key rotation", rotateManagerUnlockKey=True)

    def force_rotate_ca(self) -> None:
        """Bump ``CAConfig.ForceRotate``: the engine makes a new root CA and reissues every node certificate
        (asynchronously; ``RootRotationInProgress`` in ``/swarm`` tells when it is done)."""
        version, spec = self.version_and_spec()
        ca = dict(spec.get("CAConfig") or {})
        ca["ForceRotate"] = int(ca.get("ForceRotate") or 0) + 1
        self.update(version, {**spec, "CAConfig": ca}, what="the CA rotation")

    def unlock_key(self) -> str:
        try:
            found = self.calls.call("GET", "/swarm/unlockkey")
        except WriteFailure as failure:
            raise problem(failure, "SWM009", what="reading the unlock key") from None
        key = found.get("UnlockKey") if isinstance(found, dict) else None
        if not isinstance(key, str) or not key:
            raise ProblemError("SWM009", status=409, detail="The swarm has no unlock key: autolock is off "
                                                            "(PATCH /swarm/encryption turns it on).")
        return key

    def unlock(self, key: str) -> None:
        try:
            self.calls.call("POST", "/swarm/unlock", body={"UnlockKey": key})
        except WriteFailure as failure:
            raise problem(failure, "SWM008", what="the unlock", own_invalid=True) from None
