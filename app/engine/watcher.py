"""The watcher: keeps the cache coherent with the engine. The only writer of the cache.

Greenlets (all owned here, all supervised: an exception is logged with its traceback and the loop
restarts after a backoff, so nothing kills the watcher; all stopped by ``stop``):
- ``_follow``: owns the connection. Opens the event stream, starts ``_read`` on it at once, runs a full
  sync, then waits for the stream to end; any failure marks the cache disconnected and retries with
  exponential backoff, resyncing on reconnect.
- ``_read`` (one per open stream): only moves messages from the stream into a bounded buffer, so a full
  sync or a slow request never stops the reading. On overflow the buffer is dropped and a full sync is due.
- ``_process``: takes events from the buffer and marks the objects to re-inspect.
- ``_flush``: coalesces marks per object over a short window and re-inspects them through a small pool,
  one inspect in flight per object (marked again meanwhile: inspected again after); a failed inspect is
  retried with backoff a bounded number of times, then left to the next resync.
- ``tasks``: the ``TaskPoller`` (app/engine/task_poll.py) lists the tasks of the services that events,
  follow-ups and the engine's task counts say changed, plus a slower full sweep, because the engine emits
  no task events.
- ``_resync``: a periodic full sync as a safety net; changes it finds that no event explained mean the
  stream went silent, so the stream is reopened.
- ``_probe``: the liveness probe. The event stream has no read timeout (an idle engine is silent), so a
  frozen engine (accepting connections, answering nothing) was only noticed when some other call timed
  out, 10.6 s later. Every ``probe_interval`` an engine ``ping`` with ``probe_timeout``: a failure marks the
  cache disconnected (stale: readiness 503, ``Cache-Freshness: stale``) without touching the stream, and the
  next success while the stream is still read marks it connected again. No resync is needed: the stream
  never broke, so no event was lost (a real break goes through ``_follow`` as before). Any engine call
  answered meanwhile (an inspect, a task listing, the counts, a sync) is as good a sign of life as a ping:
  the probe then waits one interval from that answer instead of pinging, so a busy watcher pings rarely
  while a frozen engine is still found within an interval plus the timeout of its last answer.

Every engine answer is stored with the cache token taken before the call (``Cache.write_token``): the cache
refuses answers older than what it holds, so late or reordered answers never move it backwards. Full syncs
are serialised by a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.lock
import gevent.pool
import gevent.queue
import requests

from app import heap
from app.cache.history import Action, Change
from app.cache.store import Cache, InspectOutcome
from app.engine.client import EngineClient, EngineUnavailable, EventStream, Pinger
from app.engine.events import interpret
from app.engine.task_poll import TaskPoller, TaskPollSettings
from app.resources import ENGINE_KINDS, ResourceKind

log = logging.getLogger(__name__)

Key = tuple[ResourceKind, str]
Message = dict[str, object]
# Kinds whose changes the event stream announces: a sync that changes one unannounced means a silent stream.
# Tasks are excluded: the engine emits no task events, their changes are found by listing.
_EVENT_KINDS = frozenset(kind for kind in ENGINE_KINDS if kind is not ResourceKind.TASK)


@dataclass(frozen=True, slots=True)
class WatcherSettings:
    coalesce_window: float = 0.05
    inspectors: int = 4
    task_poll_interval: float = 1.0     # the engine's task counts (or, without them, a full task listing)
    task_debounce: float = 0.1
    task_sweep_interval: float = 60.0   # full task listing, the safety net
    task_follow_ups: tuple[float, ...] = (0.5, 1.5)
    resync_interval: float = 300.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    event_buffer: int = 10_000      # events read but not yet processed; overflow drops them and resyncs
    inspect_attempts: int = 5       # tries of one inspect before it is left to the next resync
    silence_grace: float = 2.0      # wait for late events before a resync's unannounced changes mean silence
    freeze_heap: bool = True        # gc.freeze() after bulk writes (app/heap.py): no full-collection stalls
    probe_interval: float = 1.0     # engine liveness probe: a ping this often...
    probe_timeout: float = 1.0      # ...answered within this, else the cache is stale (frozen engine: ~2 s)


@dataclass(slots=True)
class WatcherStats:
    events_received: int = 0
    full_syncs: int = 0
    last_sync_duration: float | None = None
    last_event_lag: float | None = None   # seconds between the engine's event time and its receipt
    reconnects: int = 0
    buffer_overflows: int = 0
    silent_streams: int = 0               # resyncs that found unannounced changes and reopened the stream
    inspect_retries: int = 0
    inspects_abandoned: int = 0
    stale_answers: int = 0                # engine answers the cache refused as older than what it holds
    loop_restarts: int = 0
    probe_failures: int = 0               # pings not answered in time (each one marks the cache stale)


class Watcher:
    def __init__(self, connect: Callable[[], EngineClient], cache: Cache,
                 settings: WatcherSettings | None = None) -> None:
        self._connect = connect
        self._client: EngineClient | None = None
        self._cache = cache
        self._settings = settings or WatcherSettings()
        self.stats = WatcherStats()
        self._events: gevent.queue.Queue[Message] = gevent.queue.Queue(self._settings.event_buffer)
        self._pending: set[Key] = set()
        self._pending_ready = gevent.event.Event()
        self._in_flight: set[Key] = set()
        self._marked_in_flight: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._touched: set[Key] = set()   # objects events or inspects touched since the last sync began
        self._answered_at = time.monotonic()   # the last engine call answered (monotonic): a sign of life
        self.task_poller = TaskPoller(
            lambda: self.client, cache, lambda: self._cache.freshness.synced and self._reading,
            lambda _exc: self._close_stream(),  # wakes the event loop, which owns reconnecting
            TaskPollSettings(debounce=self._settings.task_debounce, follow_ups=self._settings.task_follow_ups,
                             counts_interval=self._settings.task_poll_interval,
                             sweep_interval=self._settings.task_sweep_interval,
                             freeze_heap=self._settings.freeze_heap))
        self._sync_due = gevent.event.Event()
        self._sync_lock = gevent.lock.BoundedSemaphore(1)
        self._stopping = gevent.event.Event()
        self._stream: EventStream | None = None
        self._reading = False
        self._pool = gevent.pool.Pool(self._settings.inspectors)
        self._timers = gevent.pool.Group()
        self._greenlets: list[gevent.Greenlet] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        loops: tuple[tuple[str, Callable[[], None]], ...] = (
            ("follow", self._follow), ("process", self._process), ("flush", self._flush),
            ("tasks", self.task_poller.run), ("resync", self._resync), ("probe", self._probe))
        self._greenlets = [gevent.spawn(self._supervise, name, loop) for name, loop in loops]

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._close_stream()
        self._pending_ready.set()
        self.task_poller.stop()
        self._sync_due.set()
        if not self._events.full():
            self._events.put_nowait({})  # wakes _process
        gevent.joinall(self._greenlets, timeout=timeout)
        gevent.killall([g for g in self._greenlets if not g.dead], timeout=1.0)
        self._timers.kill(timeout=1.0)
        self._pool.kill(timeout=1.0)
        if self._client is not None:
            self._client.close()
        log.info("watcher stopped")

    @property
    def client(self) -> EngineClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _supervise(self, name: str, loop: Callable[[], None]) -> None:
        """Run ``loop`` until stop; an exception is logged with its traceback and the loop restarts."""
        backoff = self._settings.backoff_initial
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                loop()
            except Exception:
                if self._stopping.is_set():
                    break
                if time.monotonic() - started > self._settings.backoff_max:
                    backoff = self._settings.backoff_initial  # it ran fine for a while: not a crash loop
                self.stats.loop_restarts += 1
                log.error("watcher loop failed; restarting", exc_info=True,
                          extra={"loop": name, "restart_in_s": backoff})
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self._settings.backoff_max)

    # ------------------------------------------------------------------ event stream + full sync
    def _follow(self) -> None:
        backoff, was_live = self._settings.backoff_initial, False
        while not self._stopping.is_set():
            ended = gevent.event.Event()
            reader: gevent.Greenlet | None = None
            try:
                stream = self._stream = self.client.events()
                reader = gevent.spawn(self._read, stream, ended)
                self.full_sync()
                if not ended.is_set():
                    self._cache.set_stream_connected(True)
                    self._reading = was_live = True
                backoff = self._settings.backoff_initial
                ended.wait()
                if not self._stopping.is_set():
                    raise EngineUnavailable("event stream ended")
            except Exception as exc:  # the loop must survive anything; the cache is marked stale
                if self._stopping.is_set():
                    break
                self._lost(exc, backoff, was_live)
                was_live = False
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self._settings.backoff_max)
            finally:
                self._reading = False
                self._cache.set_stream_connected(False)
                self._close_stream()
                if reader is not None:
                    reader.kill(timeout=1.0)

    def _read(self, stream: EventStream, ended: gevent.event.Event) -> None:
        """Move messages from the stream into the buffer, and nothing else, so that reading never waits."""
        try:
            for message in stream:
                try:
                    self._events.put_nowait(message)
                except gevent.queue.Full:
                    self._overflow()
        except (EngineUnavailable, OSError, requests.exceptions.RequestException) as exc:
            if not self._stopping.is_set():
                log.info("event stream failed", extra={"error": str(exc)})
        except Exception:  # a bug, not the engine: the traceback goes to the log; follow reconnects
            if not self._stopping.is_set():
                log.error("event reader failed; reconnecting", exc_info=True, extra={"loop": "read"})
        finally:
            self._reading = False
            self._cache.set_stream_connected(False)
            ended.set()

    def _overflow(self) -> None:
        dropped = self._events.qsize() + 1
        while not self._events.empty():
            self._events.get_nowait()
        self.stats.buffer_overflows += 1
        self._sync_due.set()
        log.warning("event buffer overflowed; events dropped, full sync scheduled",
                    extra={"dropped": dropped, "capacity": self._settings.event_buffer})

    def full_sync(self) -> list[Change]:
        """List every kind and apply the result; one sync at a time. The cache refuses the parts of it that
        answers taken after its start have overtaken, so events seen meanwhile are simply inspected."""
        with self._sync_lock:
            started = time.monotonic()
            token = self._cache.write_token()
            with heap.collector_paused():   # no collection walks the snapshot while it lives (app/heap.py)
                snapshot = {kind: self.client.list(kind) for kind in ENGINE_KINDS}
                duration = time.monotonic() - started
                changes = self._cache.replace_all(snapshot, token, duration)
                counts = {k.value: len(v) for k, v in snapshot.items()}
                del snapshot
            self._answered_at = time.monotonic()
            if self._settings.freeze_heap:
                heap.settle()
            self.stats.full_syncs += 1
            self.stats.last_sync_duration = duration
            log.info("full sync", extra={"duration_ms": round(duration * 1000, 1), "changes": len(changes),
                                         "counts": counts})
            return changes

    def _process(self) -> None:
        while not self._stopping.is_set():
            message = self._events.get()
            if message and not self._stopping.is_set():
                self._on_event(message)

    def _on_event(self, message: Message) -> None:
        self.stats.events_received += 1
        self._cache.mark_contact()
        time_nano = message.get("timeNano")
        if isinstance(time_nano, int):
            self.stats.last_event_lag = max(0.0, time.time() - time_nano / 1e9)
        refresh = interpret(message)
        if refresh.target is not None:
            self._touch(refresh.target)
            self._queue({refresh.target})
        if refresh.tasks:
            self.task_poller.hint_event(message)

    def _touch(self, key: Key) -> None:
        """Note that an event or inspect explains a change to ``key`` (bounded by the number of objects)."""
        if key[0] in _EVENT_KINDS:
            self._touched.add(key)

    def _lost(self, exc: Exception, backoff: float, was_live: bool) -> None:
        self._cache.mark_disconnected()
        self.stats.reconnects += 1
        if was_live:
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
        self._pending |= keys
        self._pending_ready.set()

    def _flush(self) -> None:
        while not self._stopping.is_set():
            self._pending_ready.wait()
            self._stopping.wait(self._settings.coalesce_window)
            self._pending_ready.clear()
            batch, self._pending = self._pending, set()
            for key in batch:
                if key in self._in_flight:
                    self._marked_in_flight.add(key)  # inspected again once the current answer is in
                    continue
                self._in_flight.add(key)
                self._pool.spawn(self._inspect, key)

    def _inspect(self, key: Key) -> None:
        kind, object_id = key
        try:
            token = self._cache.write_token()
            try:
                raw = self.client.inspect(kind, object_id)
            except Exception as exc:
                self._retry(key, exc)
                return
            self._cache.mark_contact()
            self._answered_at = time.monotonic()
            self._touch(key)
            outcome = self._cache.apply_inspect(kind, object_id, raw, token)
            if outcome is InspectOutcome.STALE:
                # Something newer was stored meanwhile: read the truth again rather than trust either.
                self.stats.stale_answers += 1
                self._retry(key, None)
            else:
                self._failures.pop(key, None)
        finally:
            self._in_flight.discard(key)
            if key in self._marked_in_flight:
                self._marked_in_flight.discard(key)
                self._queue({key})

    def _retry(self, key: Key, exc: Exception | None) -> None:
        """Inspect ``key`` again after a backoff; after a bounded number of tries leave it to the resync."""
        attempts = self._failures.get(key, 0) + 1
        kind, object_id = key
        if attempts >= self._settings.inspect_attempts:
            self._failures.pop(key, None)
            self.stats.inspects_abandoned += 1
            log.warning("inspect abandoned until the next resync",
                        extra={"kind": kind.value, "id": object_id, "attempts": attempts,
                               "error": None if exc is None else str(exc)})
            return
        self._failures[key] = attempts
        self.stats.inspect_retries += 1
        delay = 0.0 if exc is None else min(self._settings.backoff_initial * 2 ** (attempts - 1),
                                             self._settings.backoff_max)
        if exc is not None and not isinstance(exc, EngineUnavailable):
            log.warning("inspect failed", exc_info=exc,
                        extra={"kind": kind.value, "id": object_id, "retry_in_s": delay})
        self._timers.add(gevent.spawn_later(delay, self._queue, {key}))

    # ------------------------------------------------------------------ liveness probe
    def _last_answer(self) -> float:
        return max(self._answered_at, self.task_poller.answered_at)

    def _probe(self) -> None:
        interval, timeout = self._settings.probe_interval, self._settings.probe_timeout
        wait = interval
        while not self._stopping.wait(wait):
            wait = interval
            client = self._client
            if client is None or not hasattr(client, "ping") or not self._reading:
                continue          # not connected yet (or a fake without ping): _follow owns the state
            since = time.monotonic() - self._last_answer()
            if since < interval and self._cache.freshness.connected:
                wait = interval - since   # another call answered: probe one interval after that answer
                continue
            pinger: Pinger = client  # type: ignore[assignment]
            try:
                pinger.ping(timeout)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                self.stats.probe_failures += 1
                if self._cache.freshness.connected:
                    log.warning("engine did not answer its liveness probe; serving cached state as stale",
                                extra={"error": str(exc), "timeout_s": timeout})
                self._cache.set_stream_connected(False)
                continue
            self._answered_at = time.monotonic()
            if self._reading and not self._cache.freshness.connected:
                log.info("engine answers its liveness probe again; state is live")
                self._cache.set_stream_connected(True)
            else:
                self._cache.mark_contact()

    # ------------------------------------------------------------------ tasks and the safety net
    def _resync(self) -> None:
        while not self._stopping.is_set():
            overflowed = self._sync_due.wait(self._settings.resync_interval)
            self._sync_due.clear()
            if self._stopping.is_set() or not self._reading:
                continue
            explained, self._touched = self._touched, set()
            try:
                changes = self.full_sync()
            except Exception as exc:
                log.warning("periodic resync failed", extra={"error": str(exc)})
                self._touched |= explained
                continue
            if not overflowed:
                self._check_silence(changes, explained)

    def _check_silence(self, changes: list[Change], explained: set[Key]) -> None:
        """A periodic sync that changed objects no event announced: the stream is connected but silent.

        The sync may simply have been faster than the events announcing its changes (a busy hub), so the
        verdict waits ``silence_grace`` for them, and is not given while read events wait in the buffer."""
        def unexplained() -> list[tuple[str, str]]:
            seen = explained | self._touched
            return sorted({(c.kind.value, c.id) for c in changes
                           if c.kind in _EVENT_KINDS and c.action is not Action.REF_CHANGED
                           and (c.kind, c.id) not in seen})

        if not unexplained():
            return
        self._stopping.wait(self._settings.silence_grace)
        suspects = unexplained()
        if suspects and self._reading and self._events.empty():
            self.stats.silent_streams += 1
            log.warning("resync found changes no event announced; reopening the event stream",
                        extra={"unexplained": suspects[:20], "count": len(suspects)})
            self._close_stream()
