"""app/heap.py and its use by the watcher: after a full sync the cache is out of the collector's full passes."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import heap
from app.cache.store import Cache
from app.engine.watcher import Watcher, WatcherSettings
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit.support import FAST


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def in_generation_2(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


def test_after_a_full_sync_the_cache_is_frozen(fake_engine: FakeEngine) -> None:
    cache = Cache()
    Watcher(lambda: fake_engine, cache, FAST).full_sync()
    entry = cache.entries(ResourceKind.TASK)[0]
    assert gc.get_freeze_count() > 0
    gc.collect()  # would move a tracked, unfrozen raw into generation 2
    assert gc.is_tracked(entry.raw) and not in_generation_2(entry.raw)


def test_without_freeze_heap_the_cache_stays_collectable(fake_engine: FakeEngine) -> None:
    from dataclasses import replace
    cache = Cache()
    Watcher(lambda: fake_engine, cache, replace(FAST, freeze_heap=False)).full_sync()
    gc.collect()
    assert gc.get_freeze_count() == 0
    assert in_generation_2(cache.entries(ResourceKind.TASK)[0].raw)


def test_settle_collects_young_garbage_before_freezing() -> None:
    gc.collect()
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    heap.settle()
    assert heap.frozen_garbage() == 0, "a young cycle that was garbage got frozen"


def test_frozen_garbage_finds_cycles_that_died_after_a_freeze() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    heap.settle()
    del cycle
    assert heap.frozen_garbage() >= 1
    assert gc.get_freeze_count() > 0


def test_settings_default_to_freezing() -> None:
    assert WatcherSettings().freeze_heap


# Measured in a fresh interpreter: in the suite's own process (GBs resident after thousands of tests) the
# freed tables land between live blocks and fragments of earlier tests, and the figure says nothing.
_TRIM_PROBE = """
from app import heap

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

assert heap._TRIM is not None, "this Debian machine has glibc"
# Dict tables over 512 bytes come from malloc (not Python's small-object arenas), as those of decoded
# engine JSON do; freed in one go, they stay resident in malloc's free lists until trimmed.
garbage = [dict.fromkeys(range(40), i) for i in range(40_000)]
keep = [dict.fromkeys(range(40)) for _ in range(20)]
grown = rss_mib()
del garbage
before = rss_mib()
heap.settle()
after = rss_mib()
print(grown, before, after)
"""


def test_settle_hands_freed_memory_back_on_glibc() -> None:
    done = subprocess.run([sys.executable, "-c", _TRIM_PROBE], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    grown, before, after = (float(x) for x in done.stdout.split())
    assert grown > 40
    assert after < before - 20, (before, after)
