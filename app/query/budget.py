"""A per-request cost budget for list work (search, filter compilation and evaluation) in the gevent worker.

Why
    The worker is one OS thread: while a request evaluates a filter over 50,000 tasks, no other request,
    health probe or event stream runs. Measured on the landed main, one 132-character filter held the
    worker for 30 s. A ``Budget`` turns that into two guarantees:

    - the request's own work is cut off after ``LIMIT_SECONDS`` (200 ms), and the client gets the 400
      problem FLT006 "Filter too costly" instead of a stalled worker;
    - the work runs in slices of at most about ``SLICE_SECONDS`` (4 ms) of CPU, and between slices the
      request parks itself until the next turn of the event loop, so sockets are polled and other
      greenlets (``/-/health`` on a fresh connection) are served.

    Only time spent running this request counts: the clock is read around each slice, so the time parked
    while other greenlets run is not charged.

How work reports to it
    ``Budget.select`` filters a list in adaptive chunks (one item first, then growing towards
    ``MAX_CHUNK`` items or half a slice of measured work, whichever is smaller), with a checkpoint after
    each chunk. Work that is expensive per call but happens deep inside compiled code (an RE2 compilation,
    up to about 8 ms) calls ``charge()``, which checkpoints the budget active in the current greenlet
    (a ``ContextVar``: greenlet ≥ 1.0 gives each greenlet its own context), so a filter whose every item
    compiles a different pattern also yields and stops in time.

Yielding
    Between slices the request calls ``app.cooperate.pause`` (a zero-delay timer, not ``gevent.sleep(0)``),
    so the loop polls sockets between slices.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from app.cooperate import pause
from app.errors import ProblemError

T = TypeVar("T")

LIMIT_SECONDS = 0.200
SLICE_SECONDS = 0.004
MAX_CHUNK = 4096

Clock = Callable[[], float]


class BudgetExceeded(Exception):
    """Raised through compiled filter code; deliberately not a ProblemError, so CEL's error absorption
    (``error || true``) cannot swallow it. ``Budget.active`` turns it into FLT006."""


class Budget:
    """The cost account of one request; not shared between requests."""

    __slots__ = ("_clock", "_mark", "_pause", "limit", "pauses", "slice", "spent")

    def __init__(self, limit: float = LIMIT_SECONDS, slice_seconds: float = SLICE_SECONDS,
                 clock: Clock = time.perf_counter, pause_fn: Callable[[], None] = pause) -> None:
        self.limit = limit
        self.slice = slice_seconds
        self.spent = 0.0            # seconds of this request's work in closed slices
        self.pauses = 0
        self._clock = clock
        self._pause = pause_fn
        self._mark = clock()        # start of the running slice

    def running(self) -> float:
        return self._clock() - self._mark

    def checkpoint(self) -> None:
        """Charge the running slice; raise BudgetExceeded over the limit, pause when the slice is used up."""
        now = self._clock()
        running = now - self._mark
        if self.spent + running > self.limit:
            self.spent += running
            self._mark = now
            raise BudgetExceeded
        if running >= self.slice:
            self.spent += running
            self._pause()
            self.pauses += 1
            self._mark = self._clock()      # the parked time is not this request's

    def total(self) -> float:
        return self.spent + self.running()

    def select(self, items: Sequence[T], keep: Callable[[T], bool]) -> list[T]:
        """``[item for item in items if keep(item)]`` in chunks, with a checkpoint after each chunk."""
        kept: list[T] = []
        start, count, chunk = 0, len(items), 1
        clock, half_slice = self._clock, self.slice / 2
        while start < count:
            stop = min(count, start + chunk)
            began = clock()
            kept.extend([item for item in items[start:stop] if keep(item)])
            took = clock() - began
            self.checkpoint()
            per_item = took / (stop - start)
            start = stop
            fits = int(half_slice / per_item) if per_item > 0 else MAX_CHUNK
            chunk = max(1, min(MAX_CHUNK, chunk * 4, fits))
        return kept

    @contextmanager
    def active(self) -> Iterator[Budget]:
        """Make this the budget ``charge()`` reports to, and turn BudgetExceeded into FLT006."""
        token = _CURRENT.set(self)
        try:
            yield self
        except BudgetExceeded:
            raise too_costly(self) from None
        finally:
            _CURRENT.reset(token)


def too_costly(budget: Budget) -> ProblemError:
    return ProblemError(
        "FLT006",
        detail=(f"The filter needed more than {budget.limit * 1000:.0f} ms of work for this request "
                f"(stopped after {budget.spent * 1000:.0f} ms); narrow it, e.g. compare fields with "
                "constants before calling matches(), or simplify its matches() patterns."))


_CURRENT: ContextVar[Budget | None] = ContextVar("shoal_list_budget", default=None)


def charge() -> None:
    """Checkpoint the budget active in this greenlet, if any (compiled code has no other way to reach it)."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.checkpoint()


def current() -> Budget | None:
    return _CURRENT.get()
