"""Engine calls outside the watcher's state: disk usage (``/disk-usage``) and the id of the node this
service talks to (``localNodeID`` of ``/cluster``).

Both are I/O on the engine socket, cooperative under gevent. ``disk_usage`` runs per request (the view is
admission-exempt: it waits, it does not compute). The local node id never changes while the engine is
the same: it is fetched once, in its own greenlet so no request waits for it, and remembered; a failed
fetch is retried after ``RETRY_SECONDS``.

Errors map to these codes: transport failures and timeouts → ``ENG001``; an engine without
the disk-usage endpoint (404/501) → ``SWM004``; any other failure or an unreadable answer → ``SWM005``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import docker
import docker.errors
import gevent
import requests

from app.errors import ProblemError

log = logging.getLogger(__name__)
RETRY_SECONDS = 30.0
DISK_TYPES = ("images", "containers", "volumes", "buildCache")
Raw = dict[str, Any]


class SystemClient(Protocol):
    def df(self) -> Raw: ...
    def info(self) -> Raw: ...


def docker_client(base_url: str, api_version: str, timeout: float = 10.0) -> Callable[[], SystemClient]:
    def connect() -> SystemClient:
        client: SystemClient = docker.APIClient(base_url=base_url, version=api_version,
                                                timeout=timeout)  # type: ignore[arg-type]
        return client
    return connect


def _size(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _row(kind: str, count: int, active: int, total: int, reclaimable: int) -> dict[str, Any]:
    return {"type": kind, "count": count, "active": active, "totalSize": total, "reclaimable": reclaimable}


def summarize(df: Raw) -> list[dict[str, Any]]:
    """The four rows of ``docker system df``, computed the way the docker CLI does: images by layer size
    (reclaimable = layers not used by an image with containers), containers by writable-layer size of
    those not running/paused/restarting, volumes by size of those no container references, build cache
    by size of the unshared records not in use."""
    images = [i for i in df.get("Images") or () if isinstance(i, dict)]
    used_images = [i for i in images if _size(i.get("Containers"))]
    layers = _size(df.get("LayersSize"))
    in_use = sum(max(0, _size(i.get("Size")) - _size(i.get("SharedSize"))) for i in used_images)
    containers = [c for c in df.get("Containers") or () if isinstance(c, dict)]
    active = [any(word in str(c.get("State", "")) for word in ("running", "paused", "restarting"))
              for c in containers]
    writable = [_size(c.get("SizeRw")) for c in containers]
    volumes = [v for v in df.get("Volumes") or () if isinstance(v, dict)]
    references = [_size((v.get("UsageData") or {}).get("RefCount")) for v in volumes]
    volume_sizes = [_size((v.get("UsageData") or {}).get("Size")) for v in volumes]
    cache = [b for b in df.get("BuildCache") or () if isinstance(b, dict)]
    unshared = [b for b in cache if not b.get("Shared")]
    return [
        _row("images", len(images), len(used_images), layers, max(0, layers - in_use)),
        _row("containers", len(containers), sum(active), sum(writable),
             sum(size for size, is_active in zip(writable, active, strict=True) if not is_active)),
        _row("volumes", len(volumes), sum(1 for refs in references if refs), sum(volume_sizes),
             sum(size for size, refs in zip(volume_sizes, references, strict=True) if not refs)),
        _row("buildCache", len(cache), sum(1 for b in cache if b.get("InUse")),
             sum(_size(b.get("Size")) for b in unshared),
             sum(_size(b.get("Size")) for b in unshared if not b.get("InUse"))),
    ]


class SystemInfo:
    """One per app (``app.extensions``): the client is made lazily, inside the worker."""

    def __init__(self, connect: Callable[[], SystemClient]) -> None:
        self._connect = connect
        self._client: SystemClient | None = None
        self._node_id: str | None = None
        self._fetching: gevent.Greenlet[Any, Any] | None = None
        self._failed_at: float | None = None

    def _engine(self) -> SystemClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def disk_usage(self) -> list[dict[str, Any]]:
        try:
            answer = self._engine().df()
        except docker.errors.APIError as exc:
            if exc.status_code in (404, 501):
                raise ProblemError("SWM004", detail=f"The engine has no disk-usage endpoint: {exc}") from exc
            raise ProblemError("SWM005", detail=f"The engine failed to report disk usage: {exc}") from exc
        except (requests.exceptions.RequestException, OSError) as exc:
            raise ProblemError("ENG001", detail=f"The engine did not answer: {exc}",
                               headers={"Retry-After": "5"}) from exc
        if not isinstance(answer, dict):
            raise ProblemError("SWM005", detail="The engine's disk-usage answer is not an object.")
        return summarize(answer)

    def local_node_id(self) -> str | None:
        """The remembered id, or None while unknown (then a fetch is started in the background)."""
        if self._node_id is None and self._fetching is None and (
                self._failed_at is None or time.monotonic() - self._failed_at >= RETRY_SECONDS):
            self._fetching = gevent.spawn(self._fetch_node_id)
        return self._node_id

    def _fetch_node_id(self) -> None:
        try:
            node_id = (self._engine().info().get("Swarm") or {}).get("NodeID")
            if isinstance(node_id, str) and node_id:
                self._node_id = node_id
            else:
                self._failed_at = time.monotonic()
        except Exception as exc:   # any failure: unknown for now, retried later
            log.info("local node id not read", extra={"error": str(exc)})
            self._failed_at = time.monotonic()
        finally:
            self._fetching = None
