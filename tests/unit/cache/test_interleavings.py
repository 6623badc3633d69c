"""Seeded interleavings of engine changes and late, reordered answers (docs/cache-exactness.md), on the cache alone.

A model engine changes services (versioned), tasks (versioned) and volumes (unversioned, names reused).
Every change queues an inspect, as an event would; task and volume listings run too. Each engine call takes
its token when it starts, reads the engine at a later step and lands at a later step still, in random
order; an inspect answered STALE is retried with a fresh token, as the watcher does. Checked throughout: no
Version.Index goes backwards in the records, no object is removed and re-created unchanged, replaying the
records gives the cache. Checked once every answer has landed: the cache equals the engine.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.cache.history import Action
from app.cache.store import Cache, InspectOutcome
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
Raw = dict[str, Any]
KINDS = (K.SERVICE, K.TASK, K.VOLUME)


@dataclass
class Call:
    """One engine call in flight: token taken, answer read (or not yet), landing later."""

    kind: ResourceKind
    object_id: str | None            # None: a listing of the kind
    token: int
    answer: Any = field(default=None)
    read: bool = False


class Model:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.version = 100
        self.created = 0
        self.engine: dict[ResourceKind, dict[str, Raw]] = {kind: {} for kind in KINDS}
        for index in range(4):
            self.engine[K.SERVICE][f"svc{index}"] = o.service(f"svc{index}", f"s{index}", version=self.bump())
        for index in range(8):
            self.engine[K.TASK][f"task{index}"] = o.task(f"task{index}", f"svc{index % 4}", o.NODE_WORKER,
                                                         version=self.bump())
        for name in ("v0", "v1", "v2"):
            self.engine[K.VOLUME][name] = self.volume(name)
        self.cache = Cache()
        self.cache.replace_all({kind: copy.deepcopy(list(objects.values())) for kind, objects in self.engine.items()},
                               self.cache.write_token())
        self.calls: list[Call] = []

    def bump(self) -> int:
        self.version += 1
        return self.version

    def volume(self, name: str) -> Raw:
        self.created += 1
        return o.volume(name, driver=self.rng.choice(["local", "nfs"]), created=f"2024-01-01T00:00:{self.created:02}Z")

    # ------------------------------------------------------------------ the engine changes
    def mutate(self) -> None:
        rng, kind = self.rng, self.rng.choice(KINDS)
        objects = self.engine[kind]
        action = rng.choice(["update", "update", "create", "remove"])
        if action == "remove" and objects:
            object_id = rng.choice(sorted(objects))
            del objects[object_id]
        elif action == "update" and objects:
            object_id = rng.choice(sorted(objects))
            if kind is K.VOLUME:
                objects[object_id] = {**objects[object_id], "Driver": rng.choice(["local", "nfs", "ceph"])}
            else:
                raw = copy.deepcopy(objects[object_id])
                raw["Version"] = {"Index": self.bump()}
                if kind is K.TASK:
                    raw["Status"]["State"] = rng.choice(["running", "failed", "shutdown"])
                objects[object_id] = raw
        else:
            if kind is K.VOLUME:  # names are reused: a removed volume may come back, different
                object_id = rng.choice(["v0", "v1", "v2", "v3"])
                objects[object_id] = self.volume(object_id)
            elif kind is K.SERVICE:
                object_id = f"svc{self.bump()}"
                objects[object_id] = o.service(object_id, object_id, version=self.version)
            else:
                object_id = f"task{self.bump()}"
                objects[object_id] = o.task(object_id, rng.choice(sorted(self.engine[K.SERVICE]) or ["gone"]),
                                            o.NODE_WORKER, version=self.version)
        self.start(kind, object_id)  # the event

    # ------------------------------------------------------------------ the watcher's calls
    def start(self, kind: ResourceKind, object_id: str | None) -> None:
        self.calls.append(Call(kind, object_id, self.cache.write_token()))

    def read(self, call: Call) -> None:
        objects = self.engine[call.kind]
        if call.object_id is None:
            call.answer = copy.deepcopy(list(objects.values()))
        else:
            found = objects.get(call.object_id)
            call.answer = copy.deepcopy(found) if found is not None else None
        call.read = True

    def land(self, call: Call) -> None:
        if call.object_id is None:
            self.cache.apply_listing(call.kind, call.answer, call.token)
            return
        outcome = self.cache.apply_inspect(call.kind, call.object_id, call.answer, call.token)
        if outcome is InspectOutcome.STALE:
            self.start(call.kind, call.object_id)  # read the truth again

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.3:
            self.mutate()
        elif roll < 0.4:
            self.start(self.rng.choice((K.TASK, K.VOLUME)), None)
        elif self.calls:
            call = self.rng.choice(self.calls)
            if not call.read:
                self.read(call)
            else:
                self.calls.remove(call)
                self.land(call)

    def drain(self) -> None:
        for _ in range(10_000):
            if not self.calls:
                return
            call = self.calls.pop(0)
            if not call.read:
                self.read(call)
            self.land(call)
        raise AssertionError("answers kept coming back STALE")


def check_records(cache: Cache) -> None:
    """No version regression, no remove + create of an unchanged object, replay == cache."""
    replayed: dict[tuple[ResourceKind, str], Raw] = {}
    removed: dict[tuple[ResourceKind, str], Raw] = {}
    for change in cache.history.since(0) or []:
        key = (change.kind, change.id)
        if change.action is Action.REF_CHANGED:
            continue
        if change.action is Action.REMOVE:
            removed[key] = replayed.pop(key)
            continue
        assert change.after is not None
        previous = replayed.get(key) or removed.get(key)
        if previous is not None and change.kind is not K.STACK:
            assert change.after != previous, f"{key}: recorded again unchanged"
            old_version = (previous.get("Version") or {}).get("Index")
            new_version = (change.after.get("Version") or {}).get("Index")
            if old_version is not None:
                assert new_version > old_version, f"{key}: version {old_version} → {new_version}"
        replayed[key] = change.after
    held = {(kind, entry.id): entry.raw for kind in ResourceKind for entry in cache.entries(kind)}
    assert replayed == held


@pytest.mark.parametrize("seed", range(25))
def test_late_and_reordered_answers_converge_to_the_engine(seed: int) -> None:
    model = Model(seed)
    for _ in range(300):
        model.step()
    check_records(model.cache)
    model.drain()
    check_records(model.cache)
    for kind in KINDS:
        held = {entry.id: entry.raw for entry in model.cache.entries(kind)}
        assert held == model.engine[kind], kind
