"""Keep the cache out of the cyclic garbage collector's full passes.

At 10,000 tasks the cache holds ~140,000 GC-tracked objects (the engine's nested dicts and lists), and a
full (generation 2) collection walks all of them while holding the GIL: 87 ms at 10,000 tasks, 530 ms at
50,000, stalling every request of the worker. Full collections come often after bulk writes (a full task
listing allocates ~20 objects per task), so they were the watcher's "sweep stall".

``settle`` runs after each bulk write (full sync, full task listing): it collects the young generations
(cheap: their survivors are only what the write kept), then ``gc.freeze()`` moves every live object into
the permanent generation, which full collections skip (0.4 µs, a list splice). Reference counting still
frees frozen objects that are dropped later (a replaced cache entry), so the cache does not leak; only a
reference *cycle* among objects that were alive at a freeze and die afterwards is never reclaimed.
Then ``malloc_trim(0)`` (glibc) hands the memory that the bulk write's temporary objects freed back to the
system: a task listing is decoded in a pool thread, whose malloc arena otherwise keeps tens of MB of freed
blocks resident (about 1 ms; it keeps RSS per task low at 10,000 tasks, docs/responsiveness.md).

``collector_paused`` keeps automatic collections off while a large engine listing is alive (fetched,
decoded, applied): its ~7 tracked objects per task are young, so each young collection meanwhile walked
them all on the hub (20-85 ms at 10,000 tasks). Explicit ``gc.collect`` still works; once the listing is
dropped (reference counting frees what the cache did not keep), ``settle`` collects the young generations,
which then hold only what the cache kept and what requests made meanwhile (nothing leaks: cycles made
during the pause are collected then). A listing applied with thousands of differences (a mass change) is
frozen as it arrives (``freeze_live``) and each part of its apply frozen after it (``freeze_young``):
otherwise the objects it builds (cache entries, history, indexes: 300,000+ for 9,000 changed tasks) were
young together and their first collection held the hub 100-400 ms.

``bench/bench_heap.py`` measures both sides: a full collection at 10,000 tasks 128 ms → 0 ms, and 0 frozen
garbage after 6,300 requests over ~1,600 connections with a freeze every second.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim if name else None  # type: ignore[assignment]
    except (OSError, AttributeError):   # not glibc (musl, macOS): nothing to trim
        return None
    return trim


_TRIM = _malloc_trim()


class _Pause:
    """The nesting of ``collector_paused`` blocks; only the hub's greenlets pause (no lock needed)."""

    depth = 0
    was_enabled = False


_pause = _Pause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Automatic collections off for the block (nestable: the outermost block restores the collector).
    Another thread re-enabling the collector meanwhile (the state store's load) only ends the pause early."""
    if _pause.depth == 0:
        _pause.was_enabled = gc.isenabled()
        gc.disable()
    _pause.depth += 1
    try:
        yield
    finally:
        _pause.depth -= 1
        if _pause.depth == 0 and _pause.was_enabled:
            gc.enable()


def freeze_live() -> None:
    """Freeze everything alive now without collecting: for a live engine listing about to be applied with
    thousands of differences (decoded JSON holds no cycles), so the cache entries, history and indexes its
    apply builds on top of it are not walked with it. Measured with ``bench/bench_heap.py``'s load: 75
    such freezes in 15 s under 12,000 requests froze no garbage (request handling makes no cycles)."""
    gc.freeze()


def freeze_young() -> None:
    """Between the parts of a long bulk write (the collector paused): collect what the last part made
    (young, small) and freeze the survivors, so the whole write is never walked at once at its end."""
    gc.collect(1)
    gc.freeze()


def settle() -> float:
    """Collect the young generations, then freeze what is alive; returns the seconds it took."""
    started = time.perf_counter()
    gc.collect(1)
    gc.freeze()
    if _TRIM is not None:
        _TRIM(0)
    took = time.perf_counter() - started
    if took > 0.02:
        log.info("heap settled", extra={"ms": round(took * 1000, 1), "frozen": gc.get_freeze_count()})
    return took


def frozen_garbage() -> int:
    """Unreachable objects among the frozen ones (a full collection: for benchmarks and diagnostics only)."""
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()
