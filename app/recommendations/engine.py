"""The recommendation engine: re-runs the checks a cache change can affect, debounced, in a greenlet.

Flow: the cache calls ``_on_changes`` with each change batch (synchronously, inside the watcher's write),
which only queues the batch. The first queued batch arms a timer (``debounce``, 500 ms); when it fires, one
greenlet turns the queued changes into *subjects* (the objects whose checks must run again) and evaluates
them in slices of about ``slice_seconds`` (5 ms), yielding to the hub between two, so a full sync at 10,000
tasks never holds the worker for long. Changes that arrive during a run wait for the next one.

What a change makes dirty:
- a service: itself; the configs, secrets, networks and volumes it used before or uses now (unused checks);
  the nodes its placement pinned it to before or now;
- a task: its service (restart loop, replicas running) and its node (pinned, manager workloads);
- a node: itself, the cluster (manager quorum), the services whose constraints name node labels;
- a config, secret, network or volume: itself.
Every ``sweep_interval`` (60 s) all services are evaluated again, since a restart loop ends by time passing;
a service changed moments ago is re-checked when its replicas grace ends.

Listeners (``subscribe``) get the ``FindingChange``s of each slice, after the store changed; they run on
the engine's greenlet and must not block (SSE queues them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import gevent
from gevent import Greenlet

from app.cache.entries import Entry, service_references
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.cooperate import pause
from app.metrics.upstream import PrometheusClient
from app.recommendations import checks
from app.recommendations.checks import UNUSED_CHECKS, Context
from app.recommendations.constraints import Placement, parse_placement
from app.recommendations.findings import CLUSTER_ID, Finding
from app.recommendations.prometheus_checks import QUERY_LIMITS, PrometheusChecks
from app.recommendations.store import FindingChange, FindingStore, Subject
from app.resources import ResourceKind

log = logging.getLogger(__name__)
Listener = Callable[[list[FindingChange]], None]
CLUSTER: Subject = ("cluster", CLUSTER_ID)
_UNUSED_KINDS = tuple(UNUSED_CHECKS)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    debounce: float = 0.5          # seconds from the first queued change to the evaluation
    sweep_interval: float = 60.0   # every service again (time-based checks)
    slice_seconds: float = 0.005   # evaluate for at most about this long, then yield to the hub
    lookback: float = 600.0        # restart-loop window
    failures: int = 3              # restart-loop threshold
    grace: float = 30.0            # replicas-not-running waits this long after a spec change
    prometheus_url: str | None = None   # set: the Prometheus checks run too (every 5 min)


@dataclass(slots=True)
class EngineStats:
    runs: int = 0
    subjects: int = 0              # evaluated, all runs
    last_run_ms: float = 0.0       # wall time of the latest run, yields included
    max_slice_ms: float = 0.0      # the longest time the engine held the hub without yielding


class RecommendationEngine:
    def __init__(self, cache: Cache, settings: EngineSettings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._cache = cache
        self.settings = settings or EngineSettings()
        self._clock = clock
        self._store = FindingStore()
        self._queued: list[list[Change]] = []
        self._dirty: dict[Subject, None] = {}
        self._listeners: list[Listener] = []
        self._placements: dict[str, Placement] = {}
        self._refs: dict[str, dict[ResourceKind, set[str]]] = {}
        self._pinned: dict[str, set[str]] = {}        # hostname or node id → services pinned there
        self._rechecks: dict[str, Greenlet] = {}
        self._timer: Greenlet | None = None
        self._sweeper: Greenlet | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.prometheus: PrometheusChecks | None = None
        self.computed_at: float | None = None
        self.stats = EngineStats()

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self._unsubscribe is not None

    def start(self) -> None:
        if self.running:
            return
        self._unsubscribe = self._cache.subscribe(self._on_changes)
        self._mark_everything()
        self._schedule()
        self._sweeper = gevent.spawn(self._sweep_loop)
        if self.settings.prometheus_url:
            self.prometheus = PrometheusChecks(self._cache, PrometheusClient(self.settings.prometheus_url,
                                                                             QUERY_LIMITS),
                                               self.publish, self.settings.lookback, self._clock)
            self.prometheus.start()

    def stop(self) -> None:
        if self._unsubscribe is None:
            return
        self._unsubscribe()
        self._unsubscribe = None
        for greenlet in [self._timer, self._sweeper, *self._rechecks.values()]:
            if greenlet is not None:
                greenlet.kill(block=False)
        self._timer = self._sweeper = None
        self._rechecks.clear()
        if self.prometheus is not None:
            self.prometheus.stop()
            self.prometheus = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with the findings that appeared, changed or disappeared, after each slice of an
        evaluation; returns the function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def publish(self, subject: Subject, findings: list[Finding]) -> None:
        """Make ``findings`` the current ones of a subject evaluated outside the engine (Prometheus checks)."""
        self._emit(self._store.replace(subject, findings, self._clock()))

    # ------------------------------------------------------------------ reads
    def findings(self) -> list[Finding]:
        """Every current finding, most severe first (shared list: do not mutate)."""
        return self._store.sorted()

    def get(self, finding_id: str) -> Finding | None:
        return self._store.get(finding_id)

    # ------------------------------------------------------------------ queueing
    def _on_changes(self, changes: list[Change]) -> None:
        self._queued.append(changes)   # O(1) inside the cache's write; mapped in the engine's greenlet
        self._schedule()

    def _mark_everything(self) -> None:
        for kind in (ResourceKind.SERVICE, ResourceKind.NODE, *_UNUSED_KINDS):
            for entry in self._cache.entries(kind):
                self._dirty[(kind.value, entry.id)] = None
        self._dirty[CLUSTER] = None

    def _schedule(self) -> None:
        if self._timer is None and self.running:
            self._timer = gevent.spawn_later(self.settings.debounce, self._run)

    def _sweep_loop(self) -> None:
        while True:
            gevent.sleep(self.settings.sweep_interval)
            for entry in self._cache.entries(ResourceKind.SERVICE):
                self._dirty[("service", entry.id)] = None
            self._schedule()

    def _recheck(self, service_id: str) -> None:
        self._rechecks.pop(service_id, None)
        self._dirty[("service", service_id)] = None
        self._schedule()

    # ------------------------------------------------------------------ one run
    def _run(self) -> None:
        try:
            self.evaluate_now()
        except Exception:   # a bug in one check must not end the engine: log, retry with the next change
            log.exception("recommendation evaluation failed")
        finally:
            self._timer = None
            if self._queued or self._dirty:
                self._schedule()

    def evaluate_now(self) -> None:
        """Evaluate everything queued (tests call this directly instead of waiting for the debounce)."""
        started = time.monotonic()
        slice_started = started
        queued, self._queued = self._queued, []
        batch, self._dirty = self._dirty, {}
        for changes in queued:
            slice_started = self._subjects_of(changes, batch, slice_started)
        context = self._context()
        done: set[Subject] = set()
        pending: list[FindingChange] = []
        count = 0
        while batch:
            subject = next(iter(batch))
            del batch[subject]
            if subject in done:
                continue
            done.add(subject)
            pending += self._evaluate(subject, context, batch)
            count += 1
            if time.monotonic() - slice_started >= self.settings.slice_seconds:
                self._emit(pending)
                pending = []
                slice_started = self._yield(slice_started)
                context = self._context()
        self._emit(pending)
        self.computed_at = self._clock()
        self.stats.runs += 1
        self.stats.subjects += count
        self.stats.last_run_ms = (time.monotonic() - started) * 1000
        self.stats.max_slice_ms = max(self.stats.max_slice_ms, (time.monotonic() - slice_started) * 1000)

    def _yield(self, slice_started: float) -> float:
        self.stats.max_slice_ms = max(self.stats.max_slice_ms, (time.monotonic() - slice_started) * 1000)
        pause()   # a loop turn that polls sockets (app.cooperate)
        return time.monotonic()

    def _emit(self, changes: list[FindingChange]) -> None:
        if changes:
            for listener in list(self._listeners):
                listener(changes)

    def _context(self) -> Context:
        node_labels: set[str] = set()
        engine_labels: set[str] = set()
        for node in self._cache.entries(ResourceKind.NODE):
            node_labels.update((node.raw.get("Spec") or {}).get("Labels") or {})
            engine_labels.update(((node.raw.get("Description") or {}).get("Engine") or {}).get("Labels") or {})
        s = self.settings
        return Context(self._clock(), frozenset(node_labels), frozenset(engine_labels), self._pinned,
                       s.lookback, s.failures, s.grace)

    # ------------------------------------------------------------------ changes → subjects
    def _subjects_of(self, changes: Iterable[Change], batch: dict[Subject, None], slice_started: float) -> float:
        """Map a change batch to subjects (a first sync is one batch of every object: yield inside it)."""
        for count, change in enumerate(changes):
            if count % 512 == 511 and time.monotonic() - slice_started >= self.settings.slice_seconds:
                slice_started = self._yield(slice_started)
            if change.action is Action.REF_CHANGED:
                continue   # derived from primary changes, which are in the same batch
            kind = change.kind
            if kind is ResourceKind.TASK:
                raw = change.after if change.after is not None else change.before
                if raw is not None:
                    batch[("service", str(raw.get("ServiceID") or ""))] = None
                    batch[("node", str(raw.get("NodeID") or ""))] = None
            elif kind is ResourceKind.NODE:
                batch[("node", change.id)] = None
                batch[CLUSTER] = None
                for service_id, placement in self._placements.items():
                    if placement.labels:
                        batch[("service", service_id)] = None
            elif kind is not ResourceKind.STACK:
                batch[(kind.value, change.id)] = None
        return slice_started

    # ------------------------------------------------------------------ one subject
    def _evaluate(self, subject: Subject, context: Context, batch: dict[Subject, None]) -> list[FindingChange]:
        kind_name, object_id = subject
        if not object_id:
            return []
        if subject == CLUSTER:
            return self._store.replace(subject, checks.cluster_findings(self._cache), context.now)
        kind = ResourceKind(kind_name)
        entry = self._cache.get(kind, object_id) if object_id else None
        findings: list[Finding] = []
        if kind is ResourceKind.SERVICE:
            placement = self._reindex_service(object_id, entry, batch)
            if entry is not None:
                findings = checks.service_findings(self._cache, entry, placement, context)
                self._arm_recheck(entry.id, checks.grace_left(entry, context))
        elif entry is not None and kind is ResourceKind.NODE:
            findings = checks.node_findings(self._cache, entry, context)
        elif entry is not None and kind in UNUSED_CHECKS:
            findings = checks.unused_findings(self._cache, entry)
        return self._store.replace(subject, findings, context.now)

    def _reindex_service(self, service_id: str, entry: Entry | None, batch: dict[Subject, None]) -> Placement:
        """Keep the per-service placement and references; mark what a difference affects."""
        old_placement = self._placements.pop(service_id, Placement())
        old_refs = self._refs.pop(service_id, {})
        placement: Placement = Placement()
        refs: dict[ResourceKind, set[str]] = {}
        if entry is not None:
            placement, refs = parse_placement(entry.raw), service_references(entry)
            self._placements[service_id] = placement
            self._refs[service_id] = refs
        for kind in _UNUSED_KINDS:
            for object_id in old_refs.get(kind, set()) ^ refs.get(kind, set()):
                batch[(kind.value, object_id)] = None
        for target in old_placement.pinned_to - placement.pinned_to:
            _discard(self._pinned, target, service_id)
        for target in placement.pinned_to:
            self._pinned.setdefault(target, set()).add(service_id)
        for target in old_placement.pinned_to ^ placement.pinned_to:
            for node in self._nodes_named(target):
                batch[("node", node)] = None
        return placement

    def _nodes_named(self, target: str) -> list[str]:
        return [node.id for node in self._cache.entries(ResourceKind.NODE) if target in (node.id, node.name)]

    def _arm_recheck(self, service_id: str, left: float | None) -> None:
        if left is not None and service_id not in self._rechecks and self.running:
            self._rechecks[service_id] = gevent.spawn_later(left + 0.05, self._recheck, service_id)


def _discard(index: dict[str, set[str]], key: str, value: str) -> None:
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]
