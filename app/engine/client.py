"""The seam to the container engine: a small Protocol and its Docker implementation.

The watcher is the only caller. It speaks in ``ResourceKind`` and raw engine dicts; everything docker-SDK
specific (low-level ``APIClient`` calls, which are ~3x cheaper than the high-level collections, error
types, the events stream) stays in this module. Engine failures surface as ``EngineUnavailable``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import docker
import docker.errors
import requests

from app.resources import ResourceKind

Raw = dict[str, Any]


class EngineUnavailable(Exception):
    """The engine did not answer (connection refused, reset, timed out) or answered with a 5xx."""


class EventStream(Protocol):
    def __iter__(self) -> Iterator[Raw]: ...
    def close(self) -> None: ...


class EngineClient(Protocol):
    def list(self, kind: ResourceKind) -> list[Raw]: ...
    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None: ...
    def events(self, since: float | None = None) -> EventStream: ...
    def close(self) -> None: ...


class DockerEngine:
    """EngineClient over the docker SDK's low-level API; created lazily, inside the worker."""

    def __init__(self, base_url: str, api_version: str = "1.41", timeout: int = 10) -> None:
        self._api = docker.APIClient(base_url=base_url, version=api_version, timeout=timeout)

    def list(self, kind: ResourceKind) -> list[Raw]:
        api = self._api
        with _engine_errors():
            if kind is ResourceKind.NODE:
                return list(api.nodes())
            if kind is ResourceKind.SERVICE:
                return list(api.services())  # type: ignore[no-untyped-call]
            if kind is ResourceKind.TASK:
                return list(api.tasks())  # type: ignore[no-untyped-call]
            if kind is ResourceKind.CONFIG:
                return list(api.configs())  # type: ignore[no-untyped-call]
            if kind is ResourceKind.SECRET:
                return list(api.secrets())
            if kind is ResourceKind.NETWORK:
                return list(api.networks())
            if kind is ResourceKind.VOLUME:
                return list(api.volumes().get("Volumes") or [])
            raise ValueError(f"{kind} is not listed by the engine")

    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None:
        """One object in the same shape as ``list`` gives it, so event refreshes and resyncs agree."""
        api = self._api
        if kind is ResourceKind.NETWORK:
            # Network inspect adds Containers/Peers and reports another Created than the listing does;
            # the id filter is a prefix match, hence the exact comparison.
            with _engine_errors():
                matches = [n for n in api.networks(ids=[object_id]) if n.get("Id") == object_id]
            return matches[0] if matches else None
        inspectors = {
            ResourceKind.NODE: api.inspect_node, ResourceKind.SERVICE: api.inspect_service,
            ResourceKind.TASK: api.inspect_task, ResourceKind.CONFIG: api.inspect_config,
            ResourceKind.SECRET: api.inspect_secret, ResourceKind.NETWORK: api.inspect_network,
            ResourceKind.VOLUME: api.inspect_volume,
        }
        try:
            with _engine_errors():
                result: Raw = inspectors[kind](object_id)
        except docker.errors.NotFound:
            return None
        return result

    def events(self, since: float | None = None) -> EventStream:
        with _engine_errors():
            stream: EventStream = self._api.events(
                since=None if since is None else int(since), decode=True)
            return stream

    def close(self) -> None:
        self._api.close()


@contextmanager
def _engine_errors() -> Iterator[None]:
    """Translate transport failures and engine 5xx answers into EngineUnavailable; keep NotFound."""
    try:
        yield
    except docker.errors.NotFound:
        raise
    except docker.errors.APIError as exc:
        if exc.is_server_error():
            raise EngineUnavailable(str(exc)) from exc
        raise
    except (requests.exceptions.RequestException, OSError) as exc:
        raise EngineUnavailable(str(exc)) from exc
