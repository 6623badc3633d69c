"""The watcher: keeps the cache coherent with the engine. The only writer of the cache.

Greenlets (all owned here, all stopped by ``stop``):
- ``_follow``: opens the event stream, runs a full sync, then reads events; any failure marks the cache
  disconnected and retries with exponential backoff, resyncing on reconnect.
- ``_flush``: coalesces events per object over a short window and re-inspects them through a small pool.
- ``_reconcile_tasks``: lists ``/tasks`` shortly after service/node/container events and on a timer,
  because the engine emits no task events.
- ``_resync``: a periodic full sync as a safety net.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.pool

from app.cache.store import Cache
from app.engine.client import EngineClient, EngineUnavailable, EventStream
from app.engine.events import interpret
from app.resources import ENGINE_KINDS, ResourceKind

log = logging.getLogger(__name__)

Key = tuple[ResourceKind, str]


@dataclass(frozen=True, slots=True)
class WatcherSettings:
    coalesce_window: float = 0.05
    inspectors: int = 4
    task_poll_interval: float = 1.0
    task_debounce: float = 0.1
    resync_interval: float = 300.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


@dataclass(slots=True)
class WatcherStats:
    events_received: int = 0
    full_syncs: int = 0
    last_sync_duration: float | None = None
    last_event_lag: float | None = None   # seconds between the engine's event time and its receipt
    reconnects: int = 0


class Watcher:
    def __init__(self, connect: Callable[[], EngineClient], cache: Cache,
                 settings: WatcherSettings | None = None) -> None:
        self._connect = connect
        self._client: EngineClient | None = None
        self._cache = cache
        self._settings = settings or WatcherSettings()
        self.stats = WatcherStats()
        self._pending: set[Key] = set()
        self._pending_ready = gevent.event.Event()
        self._tasks_due = gevent.event.Event()
        self._stopping = gevent.event.Event()
        self._stream: EventStream | None = None
        self._syncing = False
        self._seen_during_sync: set[Key] = set()
        self._pool = gevent.pool.Pool(self._settings.inspectors)
        self._greenlets: list[gevent.Greenlet] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._greenlets = [gevent.spawn(loop) for loop in
                           (self._follow, self._flush, self._reconcile_tasks, self._resync)]

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._close_stream()
        self._pending_ready.set()
        self._tasks_due.set()
        gevent.joinall(self._greenlets, timeout=timeout)
        gevent.killall([g for g in self._greenlets if not g.dead], timeout=1.0)
        self._pool.kill(timeout=1.0)
        if self._client is not None:
            self._client.close()
        log.info("watcher stopped")

    @property
    def client(self) -> EngineClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    # ------------------------------------------------------------------ event stream + full sync
    def _follow(self) -> None:
        backoff = self._settings.backoff_initial
        while not self._stopping.is_set():
            try:
                self._stream = self.client.events()
                self.full_sync()
                backoff = self._settings.backoff_initial
                for message in self._stream:
                    self._on_event(message)
                if not self._stopping.is_set():
                    raise EngineUnavailable("event stream ended")
            except Exception as exc:  # the loop must survive anything; the cache is marked stale
                if self._stopping.is_set():
                    break
                self._lost(exc, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self._settings.backoff_max)
            finally:
                self._close_stream()

    def full_sync(self) -> None:
        """List every kind and swap the result in; events seen meanwhile are re-inspected after."""
        started = time.monotonic()
        self._syncing, self._seen_during_sync = True, set()
        try:
            snapshot = {kind: self.client.list(kind) for kind in ENGINE_KINDS}
        finally:
            self._syncing = False
        duration = time.monotonic() - started
        changes = self._cache.replace_all(snapshot, duration)
        self.stats.full_syncs += 1
        self.stats.last_sync_duration = duration
        self._queue(self._seen_during_sync)
        log.info("full sync", extra={"duration_ms": round(duration * 1000, 1), "changes": len(changes),
                                     "counts": {k.value: len(v) for k, v in snapshot.items()}})

    def _on_event(self, message: dict[str, object]) -> None:
        self.stats.events_received += 1
        self._cache.mark_contact()
        time_nano = message.get("timeNano")
        if isinstance(time_nano, int):
            self.stats.last_event_lag = max(0.0, time.time() - time_nano / 1e9)
        refresh = interpret(message)
        if refresh.target is not None:
            self._queue({refresh.target})
        if refresh.tasks:
            self._tasks_due.set()

    def _lost(self, exc: Exception, backoff: float) -> None:
        was_connected = self._cache.freshness.connected
        self._cache.mark_disconnected()
        self.stats.reconnects += 1
        if was_connected:
            log.warning("engine connection lost; serving cached state as stale",
                        extra={"error": str(exc), "retry_in_s": backoff})
        else:
            log.info("engine still unreachable", extra={"error": str(exc), "retry_in_s": backoff})

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # closing a broken stream may raise; it is gone either way
                log.debug("closing the event stream failed", exc_info=True)

    # ------------------------------------------------------------------ coalesced re-inspection
    def _queue(self, keys: set[Key]) -> None:
        if not keys:
            return
        if self._syncing:
            self._seen_during_sync |= keys
        self._pending |= keys
        self._pending_ready.set()

    def _flush(self) -> None:
        while not self._stopping.is_set():
            self._pending_ready.wait()
            self._stopping.wait(self._settings.coalesce_window)
            self._pending_ready.clear()
            batch, self._pending = self._pending, set()
            for key in batch:
                self._pool.spawn(self._inspect, key)

    def _inspect(self, key: Key) -> None:
        kind, object_id = key
        try:
            raw = self.client.inspect(kind, object_id)
        except EngineUnavailable:
            return  # the event loop notices the loss and resyncs
        except Exception:
            log.exception("inspect failed", extra={"kind": kind.value, "id": object_id})
            return
        self._cache.mark_contact()
        if raw is None:
            self._cache.remove(kind, object_id)
        else:
            self._cache.upsert(kind, raw)

    # ------------------------------------------------------------------ tasks and the safety net
    def _reconcile_tasks(self) -> None:
        listing_cost, last_listed = 0.0, 0.0
        while not self._stopping.is_set():
            if self._tasks_due.wait(self._settings.task_poll_interval):
                self._stopping.wait(self._settings.task_debounce)
            # A large cluster's task list is expensive (~50 ms per 1,000 tasks): however many events
            # arrive, spend at most about a fifth of the time listing.
            gap = last_listed + 4 * listing_cost - time.monotonic()
            if gap > 0:
                self._stopping.wait(gap)
            self._tasks_due.clear()
            if self._stopping.is_set() or not self._cache.freshness.synced or self._stream is None:
                continue
            started = time.monotonic()
            try:
                tasks = self.client.list(ResourceKind.TASK)
            except Exception as exc:
                log.debug("task listing failed", extra={"error": str(exc)})
                self._close_stream()  # wakes the event loop, which owns reconnecting
                continue
            self._cache.mark_contact()
            self._cache.replace_kind(ResourceKind.TASK, tasks)
            last_listed = time.monotonic()
            listing_cost = last_listed - started

    def _resync(self) -> None:
        while not self._stopping.wait(self._settings.resync_interval):
            if self._stream is None:
                continue
            try:
                self.full_sync()
            except Exception as exc:
                log.warning("periodic resync failed", extra={"error": str(exc)})
