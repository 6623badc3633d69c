"""Helpers shared by the integration tests: a fresh engine listing and a field-by-field comparison
with the cache, plus cheap test services on the lab's local image."""

from __future__ import annotations

from typing import Any

import docker

from app.cache.entries import build_entry
from app.cache.store import Cache
from app.resources import ENGINE_KINDS, ResourceKind
from tests.conftest import wait_steady

IMAGE = "local/busybox:latest"
TEST_LABEL = "shoal.test"


def engine_listing(api: docker.APIClient) -> dict[ResourceKind, dict[str, dict[str, Any]]]:
    listers = {
        ResourceKind.NODE: api.nodes, ResourceKind.SERVICE: api.services, ResourceKind.TASK: api.tasks,
        ResourceKind.CONFIG: api.configs, ResourceKind.SECRET: api.secrets,
        ResourceKind.NETWORK: api.networks, ResourceKind.VOLUME: lambda: api.volumes()["Volumes"] or [],
    }
    listing: dict[ResourceKind, dict[str, dict[str, Any]]] = {}
    for kind in ENGINE_KINDS:
        entries = [build_entry(kind, raw) for raw in listers[kind]()]
        listing[kind] = {entry.id: entry.raw for entry in entries}
    return listing


def _diff(path: str, expected: Any, actual: Any, out: list[str]) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            _diff(f"{path}.{key}", expected.get(key, "<absent>"), actual.get(key, "<absent>"), out)
    elif expected != actual:
        out.append(f"{path}: engine={expected!r:.120} cache={actual!r:.120}")


def differences(cache: Cache, listing: dict[ResourceKind, dict[str, dict[str, Any]]],
                kinds: tuple[ResourceKind, ...] = ENGINE_KINDS) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        cached = {entry.id: entry.raw for entry in cache.entries(kind)}
        for missing in sorted(set(listing[kind]) - set(cached)):
            out.append(f"{kind.value} {missing}: missing from the cache")
        for extra in sorted(set(cached) - set(listing[kind])):
            out.append(f"{kind.value} {extra}: in the cache but not in the engine")
        for object_id in sorted(set(cached) & set(listing[kind])):
            _diff(f"{kind.value} {object_id}", listing[kind][object_id], cached[object_id], out)
    return out


def sleeper(client: docker.DockerClient, name: str, replicas: int = 1, **options: Any) -> Any:
    """A cheap replicated service: busybox sleeping, init as PID 1 so stops are instant."""
    labels = {TEST_LABEL: "1", **options.pop("labels", {})}
    return client.services.create(
        IMAGE, ["sleep", "1000000"], name=name, labels=labels, init=True, stop_grace_period=1_000_000_000,
        mode=docker.types.ServiceMode("replicated", replicas=replicas),
        endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"), **options)


def settled_etag(client: Any, service_id: str) -> str:
    """The detail's ETag once it stops changing (its tasks start after a scale and the detail embeds them)."""
    return str(wait_steady(lambda: client.get(f"/services/{service_id}").headers["ETag"], 0.5, 20,
                           message="a steady service detail"))
