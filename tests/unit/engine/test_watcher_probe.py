"""The watcher's liveness probe against a fake engine whose ping can hang: a frozen engine turns the cache
stale within about one interval plus the timeout, while the event stream stays open (nothing to resync);
answers again → live again; a fake without ``ping`` is left alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gevent

from app.cache.store import Cache
from app.engine.watcher import Watcher
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.support import FAST, wait_until

PROBING = replace(FAST, probe_interval=0.05, probe_timeout=0.05)


class FreezableEngine(FakeEngine):
    """A FakeEngine whose ``ping`` does not answer within its timeout while ``frozen``."""

    def __init__(self, objects: Any) -> None:
        super().__init__(objects)
        self.frozen = False
        self.pings = 0

    def ping(self, timeout: float) -> None:
        self.pings += 1
        if self.frozen:
            gevent.sleep(timeout)   # a frozen engine: no answer within the probe's timeout
            raise TimeoutError("no answer")


def start(engine: FakeEngine) -> tuple[Watcher, Cache]:
    cache = Cache()
    watcher = Watcher(lambda: engine, cache, PROBING)
    watcher.start()
    wait_until(lambda: cache.freshness.synced and cache.freshness.connected, 5, message="first sync")
    return watcher, cache


def test_a_frozen_engine_makes_the_cache_stale_and_a_thawed_one_live_again() -> None:
    engine = FreezableEngine(o.cluster())
    watcher, cache = start(engine)
    try:
        wait_until(lambda: engine.pings >= 2, 2, message="probing")
        syncs, streams = watcher.stats.full_syncs, len(engine.streams)
        engine.frozen = True
        wait_until(lambda: not cache.freshness.connected, 1, message="stale")
        assert watcher.stats.probe_failures >= 1
        assert cache.freshness.synced
        engine.frozen = False
        wait_until(lambda: cache.freshness.connected, 1, message="live again")
        assert watcher.stats.full_syncs == syncs and len(engine.streams) == streams   # no reconnect, no resync
    finally:
        watcher.stop(timeout=2)


def test_contact_is_refreshed_by_every_answered_ping() -> None:
    engine = FreezableEngine(o.cluster())
    watcher, cache = start(engine)
    try:
        first = cache.freshness.last_contact
        assert first is not None
        wait_until(lambda: (cache.freshness.last_contact or 0) > first, 2, message="contact refreshed")
    finally:
        watcher.stop(timeout=2)


def test_an_engine_client_without_ping_is_not_probed() -> None:
    engine = FakeEngine(o.cluster())
    watcher, cache = start(engine)
    try:
        gevent.sleep(0.3)   # not a wait: several probe intervals in which nothing may go stale
        assert cache.freshness.connected and watcher.stats.probe_failures == 0
    finally:
        watcher.stop(timeout=2)


def test_no_ping_while_other_engine_calls_answer_and_a_ping_once_they_stop() -> None:
    """A task listing, the counts or an inspect answered within the interval is as good a sign of life as
    a ping: the probe pings one interval after the last answer instead of every interval."""
    import time

    engine = FreezableEngine(o.cluster())
    watcher, _ = start(engine)
    try:
        wait_until(lambda: engine.pings >= 1, 2, message="probing")
        before = engine.pings
        for _ in range(30):   # 0.3 s = six probe intervals of answers from other calls
            watcher.task_poller.answered_at = time.monotonic()
            gevent.sleep(0.01)
        assert engine.pings == before, "pinged although other calls answered within the interval"
        wait_until(lambda: engine.pings > before, 1, message="a ping once the answers stop")
    finally:
        watcher.stop(timeout=2)
