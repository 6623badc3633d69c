"""Admission gate: one request computes at a time, first come first served, and the hub polls between two.

Why: the cache lives in one gevent worker and greenlets switch only at I/O, so a request that filters,
sorts, serialises and hashes a page holds every other connection meanwhile, the accept loop included.
Ungated, the hub ran back to back every request whose bytes arrived in one poll: under 200 keep-alive
clients a new connection's ``/-/health`` waited 1.6 s (median) and some clients starved (list p99 2.86 s
at a 1.2 ms median).

The rule:

- A gated request holds the gate from its before_request hook (after the cheap request-id, base-path and
  negotiation hooks) through the view, the JSON serialisation and every after_request hook (ETag). It is
  released when Flask hands the body to the server, before a byte is written: a slow reader never holds
  it. A lazily serialised JSON body (a generator that is no stream) is materialised inside the gate first.
- Waiters are served in arrival order by direct hand-off (no newcomer overtakes them), in two lanes: views
  whose work is about one object (:func:`light`: the resource details) wait in their own lane, and when
  both lanes have waiters they take turns. Under a flood of list requests (200 clients, ~5 ms each, a
  queue of ~1 s) a detail then waits for about one list request, not for the whole queue, and a flood of
  details cannot starve the lists either. Every hand-off,
  and the first newcomer after a release, runs on the hub's next loop iteration (a zero timer), so the hub
  polls I/O between any two gated requests: new connections are accepted and ``/-/…`` is answered within
  about one request's time, however many requests wait.
- ``/-/…`` (health, ready, metrics) is never gated: cheap, and it must answer while the worker is busy.
- At most :data:`MAX_WAITING` wait; one more is answered at once with 503 ``API013`` and
  ``Retry-After: 1``, and so is a waiter after :data:`MAX_WAIT_SECONDS`. A waiter that dies (its greenlet
  is killed) leaves the queue; one whose client closed the connection while it waited is answered without
  running the view.

Opt-outs, for a view function, a MethodView class or method, or a whole blueprint:

- :func:`exempt`: never gated. For views that wait on I/O rather than compute (engine writes, the
  Prometheus proxy): holding the gate through a round-trip would stall every reader for nothing.
- :func:`streaming`: gated while the view builds the response, released when the body starts (SSE, log
  tails), which is also what happens to any body that is not a JSON document.
- :func:`light`: gated in the light lane (above).
- :func:`released`: inside a gated view, give the gate up around an I/O wait and queue again after it.

One worker thread (the gevent hub of the gunicorn worker or of ``shoal``) serves the app: the gate's
waiters and timers belong to that hub.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from flask import Flask, Response, current_app, g, has_request_context, request
from gevent import Timeout, get_hub
from gevent.hub import Waiter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from app.errors import ProblemError
from app.http.paths import is_meta
from app.http.peer import client_socket, peer_closed

log = logging.getLogger(__name__)

MAX_WAITING: Final = 512
MAX_WAIT_SECONDS: Final = 10.0
WAIT_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
EXEMPT: Final = "exempt"
STREAMING: Final = "streaming"
LIGHT: Final = "light"

_EXTENSION_KEY = "shoal.admission"
_TICKET_KEY = "shoal.admission.ticket"
_MODE_ATTR = "__shoal_admission__"
_REJECT_LOG_INTERVAL = 10.0

T = TypeVar("T")


class Busy(Exception):
    """The request was not admitted: ``reason`` is ``full`` (queue at its bound) or ``timeout``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class GateStats:
    admitted: int = 0
    rejected_full: int = 0
    rejected_timeout: int = 0
    abandoned: int = 0          # waiters whose greenlet was killed while queued
    client_gone: int = 0        # admitted after the client had closed its connection
    wait_counts: list[int] = field(default_factory=lambda: [0] * (len(WAIT_BUCKETS) + 1))
    wait_sum: float = 0.0

    def observe_wait(self, seconds: float) -> None:
        self.admitted += 1
        self.wait_sum += seconds
        self.wait_counts[bisect_left(WAIT_BUCKETS, seconds)] += 1


class Ticket:
    """One request's claim on the gate; releasing it twice is harmless."""

    __slots__ = ("gate", "held", "light", "waited", "waiter")

    def __init__(self, gate: AdmissionGate, light: bool = False) -> None:
        self.gate = gate
        self.light = light
        self.held = False
        self.waited: float | None = None     # seconds in the queue; None: admitted at once
        self.waiter: Waiter | None = None

    def release(self) -> None:
        self.gate.release(self)


class AdmissionGate:
    """One holder; FIFO waiters in two lanes taking turns; hand-offs on the hub's next loop iteration (see
    the module docstring)."""

    def __init__(self, max_waiting: int = MAX_WAITING, max_wait: float = MAX_WAIT_SECONDS) -> None:
        self.max_waiting = max_waiting
        self.max_wait = max_wait
        self.stats = GateStats()
        self._holder: Ticket | None = None
        self._settling = False              # a hand-off timer is pending
        self._lanes: tuple[deque[Ticket], deque[Ticket]] = (deque(), deque())   # heavy, light
        self._light_last = False            # the lane served last, for taking turns
        self._last_reject_log = 0.0

    @property
    def waiting(self) -> int:
        return len(self._lanes[0]) + len(self._lanes[1])

    @property
    def busy(self) -> bool:
        return self._holder is not None

    def acquire(self, light: bool = False) -> Ticket:
        """Admit the calling greenlet, waiting in line (its lane) if needed.

        :raises Busy: the queue is full, or the wait exceeded ``max_wait``.
        """
        ticket = Ticket(self, light)
        self._enter(ticket, bounded=True)
        return ticket

    def reacquire(self, ticket: Ticket) -> None:
        """Queue again after :meth:`release` (no bound, no deadline: the request was admitted once)."""
        if not ticket.held:
            self._enter(ticket, bounded=False)

    def release(self, ticket: Ticket) -> None:
        if not ticket.held:
            return
        ticket.held = False
        if self._holder is ticket:
            self._holder = None
            self._settle()

    # ------------------------------------------------------------------------------------------ internals
    def _enter(self, ticket: Ticket, *, bounded: bool) -> None:
        if self._holder is None and not self._settling and not self.waiting:
            self._grant(ticket)
            self.stats.observe_wait(0.0)
            return
        if bounded and self.waiting >= self.max_waiting:
            self.stats.rejected_full += 1
            self._log_reject("full")
            raise Busy("full")
        ticket.waiter = Waiter()
        self._lanes[ticket.light].append(ticket)
        if self._holder is None and not self._settling:
            self._settle()
        started = time.perf_counter()
        deadline = Timeout.start_new(self.max_wait) if bounded else None
        try:
            ticket.waiter.get()
        except BaseException as exc:
            self._abandon(ticket)
            if deadline is not None and exc is deadline:
                self.stats.rejected_timeout += 1
                self._log_reject("timeout")
                raise Busy("timeout") from None
            self.stats.abandoned += 1
            raise
        finally:
            if deadline is not None:
                deadline.close()
            ticket.waiter = None
        ticket.waited = time.perf_counter() - started
        self.stats.observe_wait(ticket.waited)

    def _grant(self, ticket: Ticket) -> None:
        self._holder = ticket
        ticket.held = True

    def _settle(self) -> None:
        """Hand the gate on at the hub's next loop iteration, after it has polled I/O once."""
        self._settling = True
        get_hub().loop.timer(0.0).start(self._hand_off)

    def _hand_off(self) -> None:   # runs in the hub
        self._settling = False
        heavy, light = self._lanes
        if self._holder is not None or not (heavy or light):
            return
        self._light_last = bool(light) and (not heavy or not self._light_last)
        ticket = (light if self._light_last else heavy).popleft()
        self._grant(ticket)
        assert ticket.waiter is not None
        ticket.waiter.switch(None)

    def _abandon(self, ticket: Ticket) -> None:
        """A waiter leaves (killed, or past its deadline): out of the queue, or hand on what it was given."""
        with suppress(ValueError):
            self._lanes[ticket.light].remove(ticket)
        self.release(ticket)

    def _log_reject(self, reason: str) -> None:
        now = time.monotonic()
        if now - self._last_reject_log >= _REJECT_LOG_INTERVAL:
            self._last_reject_log = now
            log.warning("admission gate refused a request (%s): %d waiting", reason, self.waiting,
                        extra={"reason": reason, "waiting": self.waiting,
                               "rejected_full": self.stats.rejected_full,
                               "rejected_timeout": self.stats.rejected_timeout})


# ---------------------------------------------------------------------------------------------- opt-outs
def exempt(target: T) -> T:
    """Never gate this view (or class, or blueprint): it waits on I/O, not CPU. Say why at the view."""
    setattr(target, _MODE_ATTR, EXEMPT)
    return target


def streaming(target: T) -> T:
    """Gate this view while it builds the response; release when the streamed body starts."""
    setattr(target, _MODE_ATTR, STREAMING)
    return target


def light(target: T) -> T:
    """Gate this view in the light lane: its work is about one object, not the cluster (a detail)."""
    setattr(target, _MODE_ATTR, LIGHT)
    return target


@contextmanager
def released() -> Iterator[None]:
    """Inside a gated view: let other requests compute while this one waits on I/O, then queue again."""
    ticket = request.environ.get(_TICKET_KEY) if has_request_context() else None
    if not isinstance(ticket, Ticket) or not ticket.held:
        yield
        return
    ticket.gate.release(ticket)
    try:
        yield
    finally:
        ticket.gate.reacquire(ticket)


def route_mode(app: Flask) -> str | None:
    """The opt-out that applies to the current request: method, then class, view, blueprints inwards-out."""
    view = app.view_functions.get(request.endpoint) if request.endpoint else None
    candidates: list[object] = []
    if view is not None:
        view_class = getattr(view, "view_class", None)
        if view_class is not None:
            method = getattr(view_class, request.method.lower(), None)
            if method is None and request.method == "HEAD":
                method = getattr(view_class, "get", None)
            candidates += [method, view_class]
        candidates.append(view)
    candidates += [app.blueprints.get(name) for name in request.blueprints]
    for candidate in candidates:
        mode = getattr(candidate, _MODE_ATTR, None) if candidate is not None else None
        if isinstance(mode, str):
            return mode
    return None


# ---------------------------------------------------------------------------------------------- client
def client_gone(environ: dict[str, Any]) -> bool:
    """Whether the client closed its connection (EOF or reset): an EOF before the answer means nobody waits."""
    return peer_closed(client_socket(environ))


# ---------------------------------------------------------------------------------------------- Flask
def gate_of(app: Flask) -> AdmissionGate:
    gate = app.extensions[_EXTENSION_KEY]
    assert isinstance(gate, AdmissionGate)
    return gate


def _json_document(mimetype: str) -> bool:
    return mimetype in ("application/json", "application/ld+json", "application/problem+json") \
        or (mimetype.startswith("application/") and mimetype.endswith("+json"))


def _admit() -> None:
    if is_meta(request.path):
        return
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    mode = route_mode(app)
    if mode == EXEMPT:
        return
    try:
        ticket = gate_of(app).acquire(light=mode == LIGHT)
    except Busy as exc:
        detail = ("Too many requests are waiting for the worker." if exc.reason == "full"
                  else f"The request waited {MAX_WAIT_SECONDS:g} s for the worker.")
        raise ProblemError("API013", detail=detail, headers={"Retry-After": "1"}) from None
    request.environ[_TICKET_KEY] = ticket
    g.admission_mode = mode
    if ticket.waited is not None and client_gone(request.environ):
        ticket.gate.stats.client_gone += 1
        ticket.release()
        raise ProblemError("API013", detail="The client closed the connection while waiting.",
                           headers={"Retry-After": "1"})


def _materialise(response: Response) -> Response:
    """A lazily serialised JSON document is serialised here, inside the gate; streams stay lazy."""
    if (response.is_streamed and not response.direct_passthrough and request.environ.get(_TICKET_KEY)
            and g.get("admission_mode") != STREAMING and _json_document(response.mimetype or "")):
        response.make_sequence()
    return response


class _ReleaseAtBody:
    """Innermost WSGI layer: the gate is released when Flask returns the body (or fails), on every path."""

    def __init__(self, app: Callable[[dict[str, Any], Any], Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        try:
            return self.app(environ, start_response)
        finally:
            ticket = environ.pop(_TICKET_KEY, None)
            if isinstance(ticket, Ticket):
                ticket.release()


class GateCollector(Collector):
    """The gate's figures for ``/-/metrics``, read at scrape time."""

    def __init__(self, gate: AdmissionGate) -> None:
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        gate, stats = self._gate, self._gate.stats
        yield GaugeMetricFamily("shoal_admission_waiting", "Requests waiting for the admission gate.",
                                value=gate.waiting)
        yield GaugeMetricFamily("shoal_admission_busy", "1 while a gated request computes.",
                                value=1.0 if gate.busy else 0.0)
        rejected = CounterMetricFamily("shoal_admission_rejected", "Requests answered 503 API013 by the gate.",
                                       labels=["reason"])
        rejected.add_metric(["full"], stats.rejected_full)
        rejected.add_metric(["timeout"], stats.rejected_timeout)
        rejected.add_metric(["client_gone"], stats.client_gone)
        yield rejected
        cumulative, buckets = 0, []
        for bound, count in zip((*map(str, WAIT_BUCKETS), "+Inf"), stats.wait_counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily("shoal_admission_wait_seconds", "Time admitted requests waited for the gate.",
                                    buckets=buckets, sum_value=stats.wait_sum)


def init_admission(app: Flask, gate: AdmissionGate | None = None) -> AdmissionGate:
    """Register the gate's hooks and its WSGI layer; call before other WSGI middleware wraps the app."""
    from app.selfmetrics import register_collector

    gate = gate or AdmissionGate()
    app.extensions[_EXTENSION_KEY] = gate
    app.before_request(_admit)
    app.after_request(_materialise)
    app.wsgi_app = _ReleaseAtBody(app.wsgi_app)  # type: ignore[method-assign]
    register_collector(app, GateCollector(gate))
    return gate
