"""Bounded timing loops and the median/p95 summary every benchmark row reports.

Each loop has both an iteration cap and a wall-clock budget, so a pathological slowdown makes the
benchmark report fewer samples instead of running for hours.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of one timed operation, in milliseconds."""

    median_ms: float
    p95_ms: float
    runs: int

    @classmethod
    def of(cls, seconds: list[float]) -> Stats:
        if not seconds:
            raise ValueError("no samples")
        return cls(statistics.median(seconds) * 1000, percentile(seconds, 95) * 1000, len(seconds))


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually observed, no interpolation."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Budget:
    """How long to time one operation: ``iterations`` unless ``max_seconds`` run out after ``minimum``."""

    iterations: int = 200
    warmup: int = 10
    max_seconds: float = 60.0
    minimum: int = 30


def measure(operation: Callable[[], object], budget: Budget) -> Stats:
    """Warm up (memoised sorts, first-call imports), then time each call with ``perf_counter``."""
    for _ in range(budget.warmup):
        operation()
    samples: list[float] = []
    deadline = time.monotonic() + budget.max_seconds
    for index in range(budget.iterations):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
        if index + 1 >= budget.minimum and time.monotonic() > deadline:
            break
    return Stats.of(samples)
