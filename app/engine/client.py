"""The seam to the container engine: a small Protocol and its Docker implementation.

The watcher is the only caller. It speaks in ``ResourceKind`` and raw engine dicts; everything docker-SDK
specific (low-level ``APIClient`` calls, which are ~3x cheaper than the high-level collections, error
types, the events stream) stays in this module. Engine failures, timeouts included, surface as
``EngineUnavailable``.

Timeouts: every call has a connect and a per-read timeout (``timeout``); task listings, whose bodies grow
with the cluster (6.9 MB for 10,000 tasks), also have a total deadline (``listing_timeout``). The event
stream has the connect timeout only: a healthy idle engine sends nothing for as long as nothing happens, so
a read timeout cannot tell silence from death; the watcher's resync detects a silent stream instead, and
its liveness probe (``ping``, 1 s timeout, every second) a frozen engine.

Task listings never decode on the hub: the body is read cooperatively, then decoded element by element and
indexed (``prepare_listing``) in gevent's threadpool. The per-element loop is Python code, so the GIL is
handed back to the hub every switch interval (5 ms) instead of being held for one 150 ms ``json.loads``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import docker
import docker.errors
import gevent
import gevent.monkey
import requests
import urllib3
import urllib3.exceptions
from docker.transport.unixconn import UnixHTTPAdapter

from app.cache.listings import Listing, prepare_listing
from app.resources import ResourceKind

Raw = dict[str, Any]
_CHUNK = 256 * 1024
_SPACE = re.compile(r"[ \t\n\r]*")
# One decode at a time (the collector switch below is process-wide); a native lock, as only pool threads take it.
_DECODING = gevent.monkey.get_original("_thread", "allocate_lock")()


class EngineUnavailable(Exception):
    """The engine did not answer (connection refused, reset, timed out) or answered with a 5xx."""


class ServiceGone(LookupError):
    """A task listing scoped to a service the engine no longer has (404): its tasks are being reaped."""


class EventStream(Protocol):
    def __iter__(self) -> Iterator[Raw]: ...
    def close(self) -> None: ...


class EngineClient(Protocol):
    def list(self, kind: ResourceKind) -> list[Raw]: ...
    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None: ...
    def events(self, since: float | None = None) -> EventStream: ...
    def close(self) -> None: ...


class Pinger(Protocol):
    """The watcher's liveness probe: an engine client that can say, within ``timeout``, that it answers."""

    def ping(self, timeout: float) -> None: ...


class TaskLister(Protocol):
    """What the task poller needs: task listings prepared off the hub, and the services' task counts."""

    def list_tasks(self, service_id: str | None = None) -> Listing: ...
    def service_counts(self) -> dict[str, tuple[int, int, int]]: ...


class DockerEngine:
    """EngineClient over the docker SDK's low-level API; created lazily, inside the worker."""

    def __init__(self, base_url: str, api_version: str = "1.41", timeout: float = 10.0,
                 listing_timeout: float = 30.0) -> None:
        self._api = docker.APIClient(base_url=base_url, version=api_version,
                                     timeout=timeout)  # type: ignore[arg-type]
        self._timeout = timeout
        self._listing_timeout = listing_timeout
        self._pool_key = self._api._url("/")  # type: ignore[attr-defined]  # one pool for the poller's reads

    def list(self, kind: ResourceKind) -> list[Raw]:
        api = self._api
        with _engine_errors():
            if kind is ResourceKind.NODE:
                return list(api.nodes())
            if kind is ResourceKind.SERVICE:
                return list(api.services())  # type: ignore[no-untyped-call]
            if kind is ResourceKind.TASK:
                return self.list_tasks().raws
            if kind is ResourceKind.CONFIG:
                return list(api.configs())  # type: ignore[no-untyped-call]
            if kind is ResourceKind.SECRET:
                return list(api.secrets())
            if kind is ResourceKind.NETWORK:
                return list(api.networks())
            if kind is ResourceKind.VOLUME:
                return list(api.volumes().get("Volumes") or [])
            raise ValueError(f"{kind} is not listed by the engine")

    def list_tasks(self, service_id: str | None = None) -> Listing:
        """Every task, or one service's tasks, decoded and indexed in the threadpool (see the module doc)."""
        params = None if service_id is None else {"filters": json.dumps({"service": [service_id]})}
        try:
            body = self._get_body("/tasks", params)
        except docker.errors.NotFound as exc:
            if service_id is None:
                raise EngineUnavailable(str(exc)) from exc
            raise ServiceGone(service_id) from exc
        # The result comes back through ``box``, not as the thread's return value: gevent's threadpool keeps
        # a returned value in a reference cycle (its AsyncResult), so a 10,000-task listing stayed alive
        # until a collection (~70,000 objects walked on the hub: a 24-85 ms stall after each full listing).
        box: list[Listing] = []
        with _engine_errors():
            gevent.get_hub().threadpool.apply(_decode_into, (box, body, service_id))
        return box.pop()

    def list_tasks_changed(self, digest: bytes | None) -> tuple[Listing | None, bytes]:
        """Every task and the body's digest, or None for the listing when the body's digest is ``digest``
        (the task poller's full sweep of a cluster at rest: 6.8 MB at 10,000 tasks, ~100 ms of CPU to
        decode, hashed in ~5 ms instead). Both run in the threadpool."""
        try:
            body = self._get_body("/tasks", None)
        except docker.errors.NotFound as exc:
            raise EngineUnavailable(str(exc)) from exc
        box: list[tuple[Listing | None, bytes]] = []
        with _engine_errors():
            gevent.get_hub().threadpool.apply(_decode_changed_into, (box, body, digest))
        return box.pop()

    def service_counts(self) -> dict[str, tuple[int, int, int]]:
        """Service id → (running, desired, completed) tasks from ``/services?status=true`` (API ≥ 1.41):
        a change of task counts without listing tasks. Small (1.4 KB per service), decoded on the hub."""
        body = self._get_body("/services", {"status": "true"})
        counts: dict[str, tuple[int, int, int]] = {}
        for raw in json.loads(body):
            status = raw.get("ServiceStatus") or {}
            counts[str(raw.get("ID"))] = (int(status.get("RunningTasks") or 0),
                                          int(status.get("DesiredTasks") or 0),
                                          int(status.get("CompletedTasks") or 0))
        return counts

    def _get_body(self, path: str, params: dict[str, str] | None) -> bytes:
        """GET ``path`` and read the body cooperatively in chunks, within the total listing deadline."""
        api = self._api
        deadline = time.monotonic() + self._listing_timeout
        url = api._url(path)  # type: ignore[attr-defined]
        adapter = api.get_adapter(url)
        if isinstance(adapter, UnixHTTPAdapter):
            return self._get_body_pooled(adapter, url, params, deadline)
        with _engine_errors():
            response = api._get(url, params=params, stream=True)  # type: ignore[attr-defined]
            try:
                api._raise_for_status(response)  # type: ignore[attr-defined]
                return _read_until(response.iter_content(_CHUNK), deadline, path, self._listing_timeout)
            finally:
                response.close()

    def _get_body_pooled(self, adapter: UnixHTTPAdapter, url: str, params: dict[str, str] | None,
                         deadline: float) -> bytes:
        """``_get_body`` over a local socket, straight through one pool of the SDK's adapter.

        The poller's listings and counts run every second or so: through requests each cost ~1 ms of CPU
        more (proxy and netrc look-ups, cookies, hooks), and the SDK keys its unix pools by the whole URL, so
        every service's scoped listing opened (and evicted) a connection of its own. One pool, keyed by the
        API root, keeps a few connections for all of them."""
        target = urllib.parse.urlsplit(url).path
        if params:
            target += "?" + urllib.parse.urlencode(params)
        response = self._pooled_get(adapter, target, self._timeout, preload=False)
        complete = False
        try:
            if response.status >= 400:
                message = response.data.decode(errors="replace")[:500]
                complete = True
                if response.status == 404:
                    raise docker.errors.NotFound(message)
                if response.status >= 500:
                    raise EngineUnavailable(f"GET {target} answered {response.status}: {message}")
                raise docker.errors.APIError(f"GET {target} answered {response.status}: {message}")
            body = _read_until(response.stream(_CHUNK), deadline, target, self._listing_timeout)
            complete = True
            return body
        except docker.errors.APIError:   # an OSError too (through requests): the engine's answer, kept
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise EngineUnavailable(f"GET {target}: {exc}") from exc
        finally:
            if not complete:
                response.close()      # a body read only in part: the connection cannot be reused
            response.release_conn()

    def _pooled_get(self, adapter: UnixHTTPAdapter, target: str, timeout: float, *, preload: bool) -> Any:
        """``GET target`` on the local socket's one pool (keyed by the API root), no retries, no redirects;
        a transport failure is EngineUnavailable. The urllib3 response: ``preload`` reads the body."""
        try:
            return adapter.get_connection(self._pool_key).urlopen(
                "GET", target, retries=False, redirect=False, preload_content=preload,
                timeout=urllib3.Timeout(connect=timeout, read=timeout))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise EngineUnavailable(f"GET {target}: {exc}") from exc

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

    def ping(self, timeout: float) -> None:
        """``GET /_ping`` (a few bytes, no engine lock) within ``timeout`` seconds, connect and read; a frozen
        engine accepts connections but never answers: EngineUnavailable.

        It runs every second, so over a local socket it goes straight to the SDK's connection pool: through
        requests (proxy and netrc look-ups, cookies, hooks) it cost 0.6 ms of CPU, 0.2 ms this way. Other
        transports (TLS, ssh) keep requests, which applies their settings."""
        api = self._api
        url = api._url("/_ping")  # type: ignore[attr-defined]
        adapter = api.get_adapter(url)
        if not isinstance(adapter, UnixHTTPAdapter):
            with _engine_errors():
                response = api._get(url, timeout=timeout)  # type: ignore[attr-defined]
                api._raise_for_status(response)  # type: ignore[attr-defined]
            return
        answer = self._pooled_get(adapter, urllib.parse.urlsplit(url).path, timeout, preload=True)
        if answer.status >= 400:
            raise EngineUnavailable(f"ping answered {answer.status}")

    def events(self, since: float | None = None) -> EventStream:
        """The event stream: connect timeout only (the SDK opens it with no read timeout; see module doc)."""
        with _engine_errors():
            stream: EventStream = self._api.events(
                since=None if since is None else int(since), decode=True)
            return stream

    def close(self) -> None:
        self._api.close()


def _read_until(chunks: Iterator[bytes], deadline: float, what: str, limit: float) -> bytes:
    """Join ``chunks``, failing once ``deadline`` passes (a body trickling in within each read's timeout)."""
    parts = []
    for chunk in chunks:
        parts.append(chunk)
        if time.monotonic() > deadline:
            raise EngineUnavailable(f"GET {what} took longer than {limit} s")
    return b"".join(parts)


def body_digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=16).digest()


def _decode_changed_into(box: list[tuple[Listing | None, bytes]], body: bytes, digest: bytes | None) -> None:
    current = body_digest(body)
    box.append((None if current == digest else decode_listing(body), current))


def _decode_into(box: list[Listing], body: bytes, service_id: str | None) -> None:
    box.append(decode_listing(body, service_id))


def decode_listing(body: bytes, service_id: str | None = None) -> Listing:
    """Decode a JSON array of tasks one element at a time and index it; runs in a thread (pure).

    The cyclic collector is off meanwhile: the ~20 objects per task would otherwise trigger full
    collections that walk the whole heap (the cache included) while holding the GIL, 30-70 ms each at
    10,000 tasks; decoded JSON holds no cycles, so nothing is lost."""
    with _DECODING:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return prepare_listing(ResourceKind.TASK, decode_array(body), service_id)
        finally:
            if enabled:
                gc.enable()


def decode_array(body: bytes) -> list[Raw]:
    """``json.loads`` of a top-level array, element by element, so a thread running it releases the GIL
    between elements rather than holding it for the whole body."""
    text = body.decode()
    decoder = json.JSONDecoder()
    index = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[index:index + 1] != "[":
        raise EngineUnavailable("the engine answered a listing with something other than a JSON array")
    index = _SPACE.match(text, index + 1).end()  # type: ignore[union-attr]
    items: list[Raw] = []
    if text[index:index + 1] == "]":
        return items
    while True:
        item, index = decoder.raw_decode(text, index)
        items.append(item)
        index = _SPACE.match(text, index).end()  # type: ignore[union-attr]
        separator = text[index:index + 1]
        if separator == "]":
            return items
        if separator != ",":
            raise EngineUnavailable(f"malformed JSON array from the engine at offset {index}")
        index = _SPACE.match(text, index + 1).end()  # type: ignore[union-attr]


@contextmanager
def _engine_errors() -> Iterator[None]:
    """Translate transport failures, timeouts and engine 5xx answers into EngineUnavailable; keep NotFound."""
    try:
        yield
    except docker.errors.NotFound:
        raise
    except docker.errors.APIError as exc:
        if exc.is_server_error():
            raise EngineUnavailable(str(exc)) from exc
        raise
    except (requests.exceptions.RequestException, OSError, json.JSONDecodeError) as exc:
        raise EngineUnavailable(str(exc)) from exc
