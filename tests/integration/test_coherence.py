"""Coherence under injected delays: a seeded sequence of 1,000 engine changes while the watcher sees the
lab engine through DelayedEngine (slow inspects, slow listings, task listings delivered after newer ones,
an event stream that goes silent for a while). At every quiet point:
- the cache equals a fresh engine listing field by field;
- replaying the change records from the starting snapshot gives exactly the cache;
- no Version.Index goes down within one object's records, and no removed object is re-created.

Tasks keep changing on their own in the lab (a crashing service restarts), so each comparison retries
with a fresh listing until one matches; swarm objects must match exactly. ``SHOAL_COHERENCE_OPERATIONS``
shortens the run while developing (the test command runs the full 1,000).
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest

from app.cache.store import Cache
from app.engine.client import DockerEngine
from app.engine.watcher import Watcher, WatcherSettings
from tests.coherence import Recorder
from tests.conftest import wait_for
from tests.fakes import DelayedEngine
from tests.integration.engine_state import TEST_LABEL, differences, engine_listing, sleeper

pytestmark = pytest.mark.integration
OPERATIONS = int(os.environ.get("SHOAL_COHERENCE_OPERATIONS", "1000"))
QUIET_EVERY = 50
SEED = 20261124
# Delays up to 0.3 s per answer, held task listings up to 0.9 s, 1 s of silence about every 3 s; the
# periodic resync (2 s here) is what finds the changes a silence swallowed.
DELAY_SCALE, SILENCE_EVERY, SILENCE_FOR = 0.3, 3.0, 1.0
SETTINGS = WatcherSettings(coalesce_window=0.05, inspectors=4, task_poll_interval=0.5, task_debounce=0.05,
                           resync_interval=2.0, backoff_initial=0.2, backoff_max=2.0, silence_grace=0.5)


class Workload:
    """Random changes on objects this test created (and node labels it restores afterwards)."""

    def __init__(self, client: docker.DockerClient, rng: random.Random) -> None:
        self.client, self.rng = client, rng
        self.prefix = f"coh-{uuid.uuid4().hex[:6]}"
        self.services: list[Any] = []
        self.configs: list[Any] = []
        self.secrets: list[Any] = []
        self.networks: list[Any] = []
        self.volumes: list[Any] = []
        self.counter = 0

    def name(self) -> str:
        self.counter += 1
        return f"{self.prefix}-{self.counter}"

    def labels(self) -> dict[str, str]:
        return {TEST_LABEL: "1", "coh.value": str(self.rng.randint(0, 9))}

    def step(self) -> str:
        choices: list[tuple[str, Callable[[], None]]] = [
            ("create service", self.create_service), ("create config", self.create_config),
            ("create secret", self.create_secret), ("create network", self.create_network),
            ("create volume", self.create_volume), ("node label", self.node_label),
        ]
        if self.services:
            choices += [("update service", self.update_service), ("scale service", self.scale_service),
                        ("remove service", self.remove_service)]
        for pool, label in ((self.configs, "config"), (self.secrets, "secret"), (self.networks, "network"),
                            (self.volumes, "volume")):
            if pool:
                choices.append((f"remove {label}", lambda pool=pool: self.remove_unused(pool)))
        label, action = self.rng.choice(choices)
        action()
        return label

    def create_service(self) -> None:
        options: dict[str, Any] = {}
        if self.configs and self.rng.random() < 0.5:
            config = self.rng.choice(self.configs)
            options["configs"] = [docker.types.ConfigReference(config.id, config.name)]
        if self.networks and self.rng.random() < 0.5:
            options["networks"] = [self.rng.choice(self.networks).id]
        self.services.append(sleeper(self.client, self.name(), replicas=self.rng.randint(0, 1),
                                     labels=self.labels(), **options))

    def update_service(self) -> None:
        service = self.rng.choice(self.services)
        labels, env = self.labels(), [f"COH={self.rng.randint(0, 99)}"]
        _retry_conflicts(service, lambda: service.update(labels=labels, env=env))

    def scale_service(self) -> None:
        service = self.rng.choice(self.services)
        replicas = self.rng.randint(0, 2)
        _retry_conflicts(service, lambda: service.scale(replicas))

    def remove_service(self) -> None:
        service = self.services.pop(self.rng.randrange(len(self.services)))
        service.remove()

    def create_config(self) -> None:
        self.configs.append(self.client.configs.create(name=self.name(), data=b"x", labels=self.labels()))

    def create_secret(self) -> None:
        self.secrets.append(self.client.secrets.create(name=self.name(), data=b"s", labels=self.labels()))

    def create_network(self) -> None:
        self.networks.append(self.client.networks.create(self.name(), driver="overlay", attachable=True,
                                                         labels=self.labels()))

    def create_volume(self) -> None:
        self.volumes.append(self.client.volumes.create(self.name(), labels=self.labels()))

    def remove_unused(self, pool: list[Any]) -> None:
        obj = self.rng.choice(pool)
        try:
            obj.remove()
        except docker.errors.APIError:
            return  # still used by a service: a conflict is a valid outcome, nothing changed
        pool.remove(obj)

    def node_label(self) -> None:
        value = str(self.rng.randint(0, 9))
        _update_node_labels(self.client, lambda labels: {**labels, "coh.value": value})

    def cleanup(self) -> None:
        for service in self.services:
            service.remove()
        for pool in (self.configs, self.secrets, self.networks, self.volumes):
            for obj in pool:
                wait_for(lambda obj=obj: _removed(obj), 30, interval=0.5, message=f"removal of {obj.name}")
        _update_node_labels(self.client, lambda labels: {k: v for k, v in labels.items()
                                                         if not k.startswith("coh.")})


def _update_node_labels(client: docker.DockerClient, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """The node's version moves on its own (status), so an update may be "out of sequence": re-read, retry."""
    for _ in range(5):
        node = client.nodes.list()[0]
        spec = node.attrs["Spec"]
        try:
            node.update({**spec, "Labels": change(dict(spec.get("Labels") or {}))})
            return
        except docker.errors.APIError as exc:
            if "out of sequence" not in str(exc):
                raise
    raise AssertionError("the node label update kept conflicting")


def _retry_conflicts(service: Any, update: Callable[[], object]) -> None:
    """The engine answers "update out of sequence" when the version moved meanwhile: reload, retry."""
    for _ in range(5):
        service.reload()
        try:
            update()
            return
        except docker.errors.APIError as exc:
            if "out of sequence" not in str(exc):
                raise
    raise AssertionError(f"service {service.name} kept conflicting")


def _removed(obj: Any) -> bool:
    try:
        obj.remove()
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError:
        return False  # a removed service's task may still hold it for a moment
    return True


@pytest.fixture
def delayed(docker_host: str) -> Iterator[tuple[Watcher, Cache, DelayedEngine]]:
    engine = DelayedEngine(DockerEngine(docker_host, "1.41"), SEED, scale=DELAY_SCALE,
                           silence_every=SILENCE_EVERY, silence_for=SILENCE_FOR)
    cache = Cache(history_capacity=10_000_000, history_max_bytes=1 << 34)
    watcher = Watcher(lambda: engine, cache, SETTINGS)  # type: ignore[arg-type, return-value]
    watcher.start()
    try:
        wait_for(lambda: cache.freshness.synced, 60, message="first full sync")
        yield watcher, cache, engine
    finally:
        watcher.stop()


def test_records_replay_exactly_under_injected_delays(delayed, engine, docker_host) -> None:
    watcher, cache, delays = delayed
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    recorder = Recorder(cache)
    workload = Workload(client, random.Random(SEED))
    done: list[str] = []
    try:
        for index in range(1, OPERATIONS + 1):
            done.append(workload.step())
            if index % QUIET_EVERY == 0 or index == OPERATIONS:
                last: list[str] = []

                def coherent(last: list[str] = last) -> bool:
                    last[:] = differences(cache, engine_listing(engine))
                    return not last

                try:
                    wait_for(coherent, 30, interval=0.25, message="cache equal to the engine")
                except AssertionError:
                    pytest.fail(f"after {index} operations ({done[-QUIET_EVERY:]}), differences:\n"
                                + "\n".join(last[:40]))
                problems = recorder.problems(cache)
                assert not problems, f"after {index} operations, the records:\n" + "\n".join(problems[:40])
    finally:
        recorder.close()
        workload.cleanup()
    assert len(set(done)) >= 8, f"the random sequence did not exercise enough kinds: {set(done)}"
    counts = delays.counts
    assert all(counts[name] > 0 for name in ("slow inspects", "slow listings", "held task listings",
                                             "silences")), counts
    assert watcher.stats.full_syncs > 1
