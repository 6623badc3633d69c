"""Coherence: a seeded random sequence of engine changes, then at every quiet point the cache must equal
a fresh engine listing field by field.

Tasks keep changing on their own in the lab (a crashing service restarts), so each comparison retries
with a fresh listing until one matches; swarm objects must match exactly.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import docker
import pytest

from tests.conftest import wait_for
from tests.integration.engine_state import TEST_LABEL, differences, engine_listing, sleeper

pytestmark = pytest.mark.integration
OPERATIONS = 240
QUIET_EVERY = 20
SEED = 20261123


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
        node = self.client.nodes.list()[0]
        spec = node.attrs["Spec"]
        labels = dict(spec.get("Labels") or {})
        labels["coh.value"] = str(self.rng.randint(0, 9))
        node.update({**spec, "Labels": labels})

    def cleanup(self) -> None:
        for service in self.services:
            service.remove()
        for pool in (self.configs, self.secrets, self.networks, self.volumes):
            for obj in pool:
                wait_for(lambda obj=obj: _removed(obj), 30, interval=0.5, message=f"removal of {obj.name}")
        node = self.client.nodes.list()[0]
        spec = node.attrs["Spec"]
        labels = {k: v for k, v in (spec.get("Labels") or {}).items() if not k.startswith("coh.")}
        node.update({**spec, "Labels": labels})


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


def test_cache_equals_engine_after_random_changes(live_app, engine, docker_host) -> None:
    _, runtime = live_app
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    workload = Workload(client, random.Random(SEED))
    done: list[str] = []
    try:
        for index in range(1, OPERATIONS + 1):
            done.append(workload.step())
            if index % QUIET_EVERY == 0:
                last: list[str] = []

                def coherent(last: list[str] = last) -> bool:
                    last[:] = differences(runtime.cache, engine_listing(engine))
                    return not last

                try:
                    wait_for(coherent, 15, interval=0.25, message="cache equal to the engine")
                except AssertionError:
                    pytest.fail(f"after {index} operations ({done[-QUIET_EVERY:]}), differences:\n"
                                + "\n".join(last[:40]))
    finally:
        workload.cleanup()
    assert len(set(done)) >= 8, f"the random sequence did not exercise enough kinds: {set(done)}"
