"""Task polling whose cost follows change, not cluster size.

Engine 20.10 emits no task events, so task states are found by listing. Listing every task each second
costs the engine ~250 ms of CPU and the worker a 6.9 MB decode at 10,000 tasks; instead the poller lists
only the tasks of services something says changed:

- hints from the event stream (``hint_event``): a container event names its task's service (the manager's
  own containers: on a single node, every task that runs), a service event names the service, a node event
  may move tasks of any service (a full listing);
- follow-ups: a hinted service is listed again ``follow_ups`` seconds later, because the manager records a
  task's new state a moment after the container event that announced it;
- a cheap signal: ``GET /services?status=true`` every ``counts_interval`` (stretched to 30x the call's
  duration on a large engine, 60x after a round in which nothing changed) gives each service's running /
  desired / completed task counts (about 1/5 of a task listing's engine CPU, 14 KB instead of 6.9 MB);
  services whose counts moved are listed. This sees tasks on other nodes, which emit no events on the
  manager, when they start or stop running. An engine client without counts gets a full listing at
  this interval instead (the behaviour before this poller);
- a full sweep every ``sweep_interval``, the safety net: it catches every change the signals miss (a task
  on another node moving between states that leave the counts unchanged, e.g. assigned → preparing);
- a listing that changed ``keep_following`` tasks or more is a mass change still under way (a service
  scaled by thousands: the engine writes its tasks over seconds, and pending tasks have no containers, so
  no event announces the rest): its scope is listed again after each of ``moving_follow_ups``, counted from
  that listing, until a listing changes less. Before, the rest waited for the stretched counts or the
  sweep: a scale 10,000 → 1,000 → 10,000 matched the engine only after 2.5-49 s;
- the counts' stretch is capped at ``counts_max_interval``, so a change only the counts see (a task on
  another node) waits at most that long however busy the engine is.

A listing scoped to a service the engine no longer has is answered 404 while the engine still reaps that
service's tasks: one full listing shows which remain (it is not a connection failure; treating it as one
closed the event stream and served stale for a second or two after every service removal).

Every listing is taken with a cache write token and applied with ``Cache.start_listing`` (scoped to the
service when it is one), so a listing older than one already applied is refused by the cache.
Listings are decoded and indexed off the hub by the client (``DockerEngine.list_tasks``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent
import gevent.event

from app import cooperate, heap
from app.cache.listings import Listing, prepare_listing
from app.cache.store import Cache
from app.engine.client import EngineClient, ServiceGone
from app.resources import ResourceKind

log = logging.getLogger(__name__)

_SERVICE_LABEL = "com.docker.swarm.service.id"
_NOISE_PREFIXES = ("exec_", "health_status", "top", "attach", "resize", "archive-path", "export", "commit")
Counts = dict[str, tuple[int, int, int]]


class _FetchFailed(Exception):
    """An engine call of the poller failed (the connection's problem, not the poller's)."""


class _Lister(Protocol):
    def list_tasks(self, service_id: str | None = None) -> Listing: ...


class _SweepLister(Protocol):
    def list_tasks_changed(self, digest: bytes | None) -> tuple[Listing | None, bytes]: ...


class _Counter(Protocol):
    def service_counts(self) -> Counts: ...


@dataclass(frozen=True, slots=True)
class TaskPollSettings:
    debounce: float = 0.1                        # gather hints this long before listing
    follow_ups: tuple[float, ...] = (0.5, 1.5)   # list a hinted service again after these delays
    counts_interval: float = 5.0                 # /services?status=true; 0 turns the signal off
    sweep_interval: float = 60.0                 # full task listing, the safety net
    max_services: int = 50                       # more services due at once: one full listing instead
    freeze_heap: bool = False                    # app/heap.settle() after a full or large listing
    counts_cost_share: int = 30                  # the counts wait ≥ 30x their own duration (engine CPU) ...
    idle_cost_share: int = 60                    # ... 60x after a round in which nothing had changed ...
    counts_max_interval: float = 4.0             # ... but never longer than this (unless counts_interval is)
    keep_following: int = 10                     # a listing changing this many tasks: a mass change under way
    moving_follow_ups: tuple[float, ...] = (0.5, 1.5, 4.0)   # its scope is listed again after these delays
    apply_step: int = 100                        # objects applied per write (~7 ms); the event loop turns between
    large_listing: int = 1000                    # a listing this long is "bulk" for heap.settle()


@dataclass(slots=True)
class TaskPollStats:
    service_listings: int = 0
    full_listings: int = 0
    counts_polls: int = 0
    stale_listings: int = 0
    failures: int = 0
    last_full_duration: float | None = None
    max_apply_seconds: float = 0.0   # the longest time one part of a listing's apply held the hub
    moving_follow_ups: int = 0       # listings whose many changes re-armed their scope's follow-ups
    unchanged_sweeps: int = 0        # full listings whose body was the last applied one's (not decoded)
    listed: dict[str, int] = field(default_factory=dict)   # service id → listings (bounded by services)


class TaskPoller:
    """Runs ``run`` in one greenlet (the watcher supervises it); ``hint*`` may be called from any greenlet."""

    def __init__(self, client: Callable[[], EngineClient], cache: Cache, ready: Callable[[], bool],
                 on_failure: Callable[[Exception], None], settings: TaskPollSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, pause: Callable[[], None] = cooperate.pause) -> None:
        self._client = client
        self._cache = cache
        self._ready = ready
        self._on_failure = on_failure
        self.settings = settings or TaskPollSettings()
        self._clock = clock
        self._pause = pause
        self.stats = TaskPollStats()
        self._due: set[str] = set()
        self._full_due = False
        self._later: dict[str | None, list[float]] = {}   # service id (None: all) → follow-ups to come
        self._counts: Counts | None = None
        now = clock()
        self._next_sweep = now + self.settings.sweep_interval
        self._next_counts = now + self.settings.counts_interval
        self._wake = gevent.event.Event()
        self._stopping = gevent.event.Event()
        self.answered_at = float("-inf")   # time.monotonic() of the last engine answer (the watcher's probe)
        # The body digest of the last full listing applied, and the cache's change sequence after it: the
        # same body while the cache has not changed since means there is nothing to apply (not decoded).
        self._full_digest: tuple[bytes, int] | None = None

    # ------------------------------------------------------------------ signals
    def hint(self, service_id: str | None) -> None:
        """List this service's tasks soon (None: every task)."""
        if service_id is None:
            self._full_due = True
        else:
            self._due.add(service_id)
            now = self._clock()
            later = [now + delay for delay in self.settings.follow_ups]
            # A mass change's longer follow-ups (``moving_follow_ups``) outlast a new hint's.
            tail = [at for at in self._later.get(service_id, ()) if not later or at > later[-1]]
            self._later[service_id] = later + tail
        self._wake.set()

    def hint_event(self, message: Mapping[str, Any]) -> None:
        """Derive the hint an engine event carries, if any."""
        event_type = str(message.get("Type") or "")
        action = str(message.get("Action") or "")
        actor = message.get("Actor") or {}
        if event_type == "container" and not action.startswith(_NOISE_PREFIXES):
            service_id = str((actor.get("Attributes") or {}).get(_SERVICE_LABEL) or "")
            if service_id:
                self.hint(service_id)
        elif event_type == "service" and actor.get("ID"):
            self.hint(str(actor["ID"]))
        elif event_type == "node" and action != "create":
            self.hint(None)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while not self._stopping.is_set():
            if self._wake.wait(max(0.0, self._next_wake() - self._clock())):
                self._stopping.wait(self.settings.debounce)
            self._wake.clear()
            if self._stopping.is_set():
                return
            if not self._ready():
                continue
            try:
                self.poll_once()
            except _FetchFailed as failed:  # anything else is a bug: the watcher's supervisor logs it
                exc = failed.__cause__ if isinstance(failed.__cause__, Exception) else failed
                self.stats.failures += 1
                log.info("task listing failed", extra={"error": str(exc)})
                self._on_failure(exc)

    def _next_wake(self) -> float:
        times = [self._next_sweep]
        if self.settings.counts_interval > 0:
            times.append(self._next_counts)
        times += [pending[0] for pending in self._later.values() if pending]
        return min(times)

    def poll_once(self) -> None:
        """One round: work out what is due, list it, apply it."""
        now = self._clock()
        due, self._due = self._due, set()
        full = self._full_due or now >= self._next_sweep
        for scope, pending in list(self._later.items()):
            while pending and pending[0] <= now:
                pending.pop(0)
                if scope is None:
                    full = True
                else:
                    due.add(scope)
            if not pending:
                del self._later[scope]
        if not full and self.settings.counts_interval > 0 and now >= self._next_counts:
            changed = self._changed_counts()
            # The counts cost the engine time in proportion to its tasks (56 ms of CPU at 10,000): spend
            # at most ~1/30 of the time on them whatever the configured interval, ~1/60 while nothing
            # changes (an idle cluster of 10,000 tasks: ~2.5 % of a core of the engine instead of ~5 %).
            quiet = not changed and not due
            share = self.settings.idle_cost_share if quiet else self.settings.counts_cost_share
            stretched = min(share * (self._clock() - now), self.settings.counts_max_interval)
            self._next_counts = self._clock() + max(self.settings.counts_interval, stretched)
            if changed is None:
                full = True
            else:
                due |= changed
        if full or len(due) > self.settings.max_services:
            self._full_due = False
            self._list(None)
            self._next_sweep = self._clock() + self.settings.sweep_interval
            return
        gone = False
        for service_id in sorted(due):
            try:
                self._list(service_id)
            except ServiceGone:
                # A removed service: the engine refuses to list its tasks while it still reaps them, so
                # only a full listing shows which remain (not a failure of the connection).
                gone = True
        if gone:
            self._list(None)
            self._next_sweep = self._clock() + self.settings.sweep_interval

    def _changed_counts(self) -> set[str] | None:
        """The services whose task counts moved since the last call; None when the engine client offers
        no counts (then a full listing stands in for them, as before this poller existed)."""
        client = self._client()
        if not hasattr(client, "service_counts"):
            return None
        counter: _Counter = client  # type: ignore[assignment]
        try:
            counts = counter.service_counts()
        except Exception as exc:
            raise _FetchFailed from exc
        self.answered_at = time.monotonic()
        self.stats.counts_polls += 1
        previous, self._counts = self._counts, counts
        if previous is None:
            return set()
        return {sid for sid in previous.keys() | counts.keys() if previous.get(sid) != counts.get(sid)}

    def _list(self, service_id: str | None) -> None:
        started = self._clock()
        token = self._cache.write_token()
        # No automatic collection while the listing lives (app/heap.py): each one walked its ~7 young
        # objects per task on the hub. Dropped at the end of the block, it is freed by reference counting.
        with heap.collector_paused():
            fetched, digest = self._fetch(service_id)
            self._cache.mark_contact()
            self.answered_at = time.monotonic()
            if fetched is None:   # a full listing identical to the last one applied, the cache unchanged since
                self.stats.unchanged_sweeps += 1
                self.stats.full_listings += 1
                self.stats.last_full_duration = self._clock() - started
                return
            listing = fetched
            applying = self._clock()
            changes = self._apply(listing, token, service_id)
            applied = self._clock()
            size = len(listing)
            del listing, fetched
        if service_id is None:
            self._full_digest = None if digest is None or changes is None else (digest, self._cache.freshness.seq)
        if changes is None:
            self.stats.stale_listings += 1
        if service_id is None or applied - started > 0.5:
            log.info("task listing", extra={"service": service_id, "tasks": size,
                                            "changes": changes,
                                            "fetch_ms": round((applying - started) * 1000, 1),
                                            "apply_ms": round((applied - applying) * 1000, 1)})
        if changes is not None and changes >= self.settings.keep_following:
            done = self._clock()
            self._later[service_id] = [done + delay for delay in self.settings.moving_follow_ups]
            self.stats.moving_follow_ups += 1
        bulk = service_id is None or size >= self.settings.large_listing
        if (bulk or (changes or 0) >= self.settings.large_listing) and self.settings.freeze_heap:
            heap.settle()
        if service_id is None:
            self.stats.full_listings += 1
            self.stats.last_full_duration = self._clock() - started
        else:
            self.stats.service_listings += 1
            if service_id in self.stats.listed or len(self.stats.listed) < 10_000:
                self.stats.listed[service_id] = self.stats.listed.get(service_id, 0) + 1

    def _apply(self, listing: Listing, token: int, service_id: str | None) -> int | None:
        """Apply the listing in parts of ``apply_step`` objects, giving the event loop a turn between two
        (thousands of changed tasks cost ~50 µs each: a service scaled to 10,000 held the worker 0.3 to 0.5 s
        in one write); returns the number of changes, None for a listing older than one already applied."""
        started = self._clock()
        pending = self._cache.start_listing(ResourceKind.TASK, listing, token, service_id=service_id)
        if pending is None:
            return None
        # Thousands of differences (a mass change): freeze the listing now and each part after it, so
        # nothing walks the whole write at once (the collector is paused meanwhile: _list).
        bulk = self.settings.freeze_heap and pending.remaining >= self.settings.large_listing
        if bulk:
            heap.freeze_live()
        count = 0
        while True:
            count += len(pending.step(self.settings.apply_step))
            if bulk:
                heap.freeze_young()
            self.stats.max_apply_seconds = max(self.stats.max_apply_seconds, self._clock() - started)
            if pending.done:
                return count
            self._pause()
            started = self._clock()

    def _fetch(self, service_id: str | None) -> tuple[Listing | None, bytes | None]:
        """The listing (None: a full one identical to the last applied) and its body's digest, if known."""
        try:
            client = self._client()
            if service_id is None and hasattr(client, "list_tasks_changed"):
                sweeper: _SweepLister = client  # type: ignore[assignment]
                known = self._full_digest
                unchanged = known[0] if known is not None and known[1] == self._cache.freshness.seq else None
                return sweeper.list_tasks_changed(unchanged)
            return self._fetch_unguarded(service_id), None
        except ServiceGone:
            raise
        except Exception as exc:
            raise _FetchFailed from exc

    def _fetch_unguarded(self, service_id: str | None) -> Listing:
        client = self._client()
        if hasattr(client, "list_tasks"):
            lister: _Lister = client  # type: ignore[assignment]
            return lister.list_tasks(service_id)
        # An engine client without scoped listings (test fakes): list everything, keep the scope.
        return prepare_listing(ResourceKind.TASK, client.list(ResourceKind.TASK), service_id)
