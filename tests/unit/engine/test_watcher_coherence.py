"""Coherence with injected delays, fast: a seeded workload on a FakeEngine seen through DelayedEngine (slow
inspects and listings, task listings delivered after newer ones, an event stream that goes silent). After
each quiet point the cache equals the engine, and the change records replay exactly into the cache with
no version regression and no remove+create pair (the lab version: tests/integration/test_coherence.py)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from app.cache.entries import build_entry
from app.cache.store import Cache
from app.engine.watcher import Watcher
from app.resources import ENGINE_KINDS, ResourceKind
from tests.coherence import Recorder
from tests.fakes import DelayedEngine, FakeEngine
from tests.unit import objects as o
from tests.unit.support import FAST, wait_until

K = ResourceKind
SEED = 8_2026
OPERATIONS = 1000
QUIET_EVERY = 50
SETTINGS = replace(FAST, resync_interval=0.3, task_poll_interval=0.05, silence_grace=0.1)


class FakeWorkload:
    """Seeded changes to a FakeEngine, announced as the engine would (tasks mostly not at all)."""

    def __init__(self, engine: FakeEngine, rng: random.Random) -> None:
        self.engine, self.rng = engine, rng
        self.version = 1000
        self.counter = 0

    def next_version(self) -> int:
        self.version += 1
        return self.version

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return o.engine_id(f"{prefix}{self.counter}z")

    def step(self) -> str:
        objects, rng = self.engine.objects, self.rng
        choices = ["create config", "create service", "create volume", "update node"]
        if objects[K.CONFIG]:
            choices += ["update config", "remove config"]
        if objects[K.SERVICE]:
            choices += ["update service", "remove service", "create task", "create task"]
        if objects[K.TASK]:
            choices += ["update task", "update task", "remove task"]
        if objects[K.VOLUME]:
            choices += ["remove volume"]
        action = rng.choice(choices)
        getattr(self, action.replace(" ", "_"))()
        return action

    def pick(self, kind: ResourceKind) -> str:
        return self.rng.choice(sorted(self.engine.objects[kind]))

    def create_config(self) -> None:
        config_id = self.new_id("cfg")
        self.engine.objects[K.CONFIG][config_id] = o.config(config_id, f"cfg{self.counter}",
                                                            version=self.next_version())
        self.engine.emit("config", "create", config_id)

    def update_config(self) -> None:
        config_id = self.pick(K.CONFIG)
        raw = self.engine.objects[K.CONFIG][config_id]
        self.engine.objects[K.CONFIG][config_id] = o.config(config_id, raw["Spec"]["Name"],
                                                            stack=self.rng.choice([None, "shop"]),
                                                            version=self.next_version())
        self.engine.emit("config", "update", config_id)

    def remove_config(self) -> None:
        config_id = self.pick(K.CONFIG)
        del self.engine.objects[K.CONFIG][config_id]
        self.engine.emit("config", "remove", config_id)

    def create_service(self) -> None:
        service_id = self.new_id("svc")
        self.engine.objects[K.SERVICE][service_id] = o.service(service_id, f"svc{self.counter}",
                                                               version=self.next_version())
        self.engine.emit("service", "create", service_id)

    def update_service(self) -> None:
        service_id = self.pick(K.SERVICE)
        raw = self.engine.objects[K.SERVICE][service_id]
        self.engine.objects[K.SERVICE][service_id] = o.service(
            service_id, raw["Spec"]["Name"], replicas=self.rng.randint(0, 3), version=self.next_version())
        self.engine.emit("service", "update", service_id)

    def remove_service(self) -> None:
        service_id = self.pick(K.SERVICE)
        del self.engine.objects[K.SERVICE][service_id]
        tasks = self.engine.objects[K.TASK]
        for task_id in [t for t, raw in tasks.items() if raw["ServiceID"] == service_id]:
            del tasks[task_id]
        self.engine.emit("service", "remove", service_id)

    def create_task(self) -> None:
        task_id = self.new_id("task")
        self.engine.objects[K.TASK][task_id] = o.task(task_id, self.pick(K.SERVICE), o.NODE_WORKER,
                                                      slot=self.counter, state="pending",
                                                      version=self.next_version())
        self.announce_task(task_id, "create")

    def update_task(self) -> None:
        task_id = self.pick(K.TASK)
        raw: dict[str, Any] = self.engine.objects[K.TASK][task_id]
        self.engine.objects[K.TASK][task_id] = o.task(
            task_id, raw["ServiceID"], raw["NodeID"], slot=raw.get("Slot"),
            state=self.rng.choice(["running", "failed", "complete"]), version=self.next_version())
        self.announce_task(task_id, "die")

    def remove_task(self) -> None:
        task_id = self.pick(K.TASK)
        del self.engine.objects[K.TASK][task_id]
        self.announce_task(task_id, "destroy")

    def announce_task(self, task_id: str, action: str) -> None:
        if self.rng.random() < 0.5:  # a container on this node; otherwise only the task poll sees it
            self.engine.emit("container", action, "c" * 64, **{"com.docker.swarm.task.id": task_id})

    def create_volume(self) -> None:
        name = f"vol{self.new_id('v')[:8]}"
        self.engine.objects[K.VOLUME][name] = o.volume(name)
        self.engine.emit("volume", "create", name)

    def remove_volume(self) -> None:
        name = self.pick(K.VOLUME)
        del self.engine.objects[K.VOLUME][name]
        self.engine.emit("volume", "destroy", name)

    def update_node(self) -> None:
        node_id = self.pick(K.NODE)
        raw = self.engine.objects[K.NODE][node_id]
        self.engine.objects[K.NODE][node_id] = o.node(
            node_id, raw["Description"]["Hostname"], availability=self.rng.choice(["active", "pause", "drain"]),
            version=self.next_version())
        self.engine.emit("node", "update", node_id)


def differences(cache: Cache, engine: FakeEngine) -> list[str]:
    out = []
    for kind in ENGINE_KINDS:
        expected = {FakeEngine.key(kind, raw): build_entry(kind, raw).raw for raw in engine.objects[kind].values()}
        cached = {entry.id: entry.raw for entry in cache.entries(kind)}
        out += [f"{kind.value} {i}" for i in sorted(set(expected) ^ set(cached))]
        out += [f"{kind.value} {i} differs" for i in sorted(set(expected) & set(cached)) if expected[i] != cached[i]]
    return out


def test_records_replay_exactly_under_injected_delays(fake_engine: FakeEngine) -> None:
    delayed = DelayedEngine(fake_engine, SEED, scale=0.02, silence_every=0.6, silence_for=0.1)
    cache = Cache(history_capacity=1_000_000)
    watcher = Watcher(lambda: delayed, cache, SETTINGS)  # type: ignore[arg-type, return-value]
    watcher.start()
    try:
        wait_until(lambda: cache.freshness.synced, 5, message="the first sync")
        recorder = Recorder(cache)
        workload, done = FakeWorkload(fake_engine, random.Random(SEED)), []
        for index in range(1, OPERATIONS + 1):
            done.append(workload.step())
            if index % QUIET_EVERY == 0:
                wait_until(lambda: not differences(cache, fake_engine), 10,
                           message=f"cache equal to the engine after {index} operations")
                problems = recorder.problems(cache)
                assert not problems, f"after {index} operations:\n" + "\n".join(problems[:30])
            elif workload.rng.random() < 0.3:
                wait_until(lambda: True, 0)  # let the watcher interleave with the workload
        assert len(set(done)) >= 12
        counts = delayed.counts
        assert all(counts[name] > 0 for name in ("slow inspects", "slow listings", "held task listings",
                                                 "events dropped", "silences")), counts
        assert watcher.stats.full_syncs > 1  # silent-stream detection itself: test_watcher_answers.py
    finally:
        watcher.stop(timeout=2)
