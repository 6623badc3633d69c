"""Log URI followers with a fake engine stream: new lines notify the subscribers of the logs URI (by id or
name) that may read the service, at most once per 250 ms; a follower ends when nobody wants its URI; the
number of followers is capped."""

from __future__ import annotations

import json
from collections.abc import Iterator

import gevent
import pytest
from flask import Flask
from gevent.queue import Queue

from app.acl.source import load_text
from app.cache.store import Cache
from app.logs.lines import LogLine
from app.mcp import registry
from app.mcp.notifications import LOG_WINDOW, Notifier
from app.mcp.resource_logs import FollowerLimit, LogFollowers
from tests.unit import objects as o
from tests.unit.mcp.test_resources_support import POLICY, FakeSubscriber, identity
from tests.unit.support import wait_until

LOGS_DB = f"service://services/{o.SVC_DB}/logs"


class FakeReader:
    """An engine follow stream: batches put in the queue come out; None ends it."""

    def __init__(self) -> None:
        self.queue: Queue[list[LogLine] | None] = Queue()
        self.closed = False

    def batches(self) -> Iterator[list[LogLine]]:
        while True:
            batch = self.queue.get()
            if batch is None:
                return
            yield batch

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def readers() -> dict[str, list[FakeReader]]:
    return {}


@pytest.fixture
def followers(synced_cache: Cache, readers: dict[str, list[FakeReader]]) -> Iterator[LogFollowers]:
    app = Flask("logs-test")
    policy = load_text(json.dumps(POLICY), "inline")
    notifier = Notifier(app, synced_cache, policy_of=lambda: policy, auth_enabled=True)
    notifier._refresh_policy()

    def open_reader(service_id: str) -> FakeReader:
        reader = FakeReader()
        readers.setdefault(service_id, []).append(reader)
        return reader

    made = LogFollowers(app, synced_cache, notifier, check_every=0.05, max_followers=2,
                        open_reader=open_reader)  # type: ignore[arg-type]
    yield made
    made.stop()
    notifier.stop()


def line(text: str) -> LogLine:
    return LogLine(1_700_000_000_000_000_000, "stdout", text)


def test_new_lines_notify_readers_of_the_logs_uri(followers: LogFollowers,
                                                  readers: dict[str, list[FakeReader]]) -> None:
    alice = FakeSubscriber(identity("alice"), {LOGS_DB})
    by_name = FakeSubscriber(identity("alice"), {"service://services/shop_db/logs"})
    bob = FakeSubscriber(identity("bob"), {LOGS_DB})
    registry.subscribers(followers.app).update((alice, by_name, bob))
    followers.ensure(o.SVC_DB)
    wait_until(lambda: readers.get(o.SVC_DB), timeout=1.0)
    reader = readers[o.SVC_DB][0]
    reader.queue.put([line("one")])
    wait_until(lambda: alice.updated() and by_name.updated(), timeout=1.0, interval=0.005)
    assert alice.updated() == [LOGS_DB] and by_name.updated() == ["service://services/shop_db/logs"]
    for text in ("two", "three", "four"):     # a burst within the window: one more, at its end
        reader.queue.put([line(text)])
    gevent.sleep(LOG_WINDOW / 2)
    assert alice.updated() == [LOGS_DB]
    wait_until(lambda: len(alice.updated()) == 2, timeout=1.0, interval=0.005)
    gevent.sleep(LOG_WINDOW)
    assert len(alice.updated()) == 2
    assert bob.received == []                   # bob may not read shop_db


def test_a_follower_ends_when_nobody_wants_its_uri(followers: LogFollowers,
                                                   readers: dict[str, list[FakeReader]]) -> None:
    watcher = FakeSubscriber(identity("root"), {LOGS_DB})
    registry.subscribers(followers.app).add(watcher)
    followers.ensure(o.SVC_DB)
    followers.ensure(o.SVC_DB)                  # already followed: no second stream
    wait_until(lambda: readers.get(o.SVC_DB), timeout=1.0)
    gevent.sleep(0.15)
    assert followers.following == {o.SVC_DB} and len(readers[o.SVC_DB]) == 1
    watcher.uris.clear()
    wait_until(lambda: not followers.following, timeout=1.0, interval=0.01)
    assert readers[o.SVC_DB][0].closed


def test_the_number_of_followers_is_capped(followers: LogFollowers) -> None:
    registry.subscribers(followers.app).add(FakeSubscriber(identity("root"), {LOGS_DB}))
    followers.ensure(o.SVC_DB)
    followers.ensure(o.SVC_WEB)
    with pytest.raises(FollowerLimit, match="at most 2"):
        followers.ensure(o.SVC_MONITOR)


def test_a_stream_the_engine_ends_is_reopened_while_wanted(followers: LogFollowers,
                                                           readers: dict[str, list[FakeReader]]) -> None:
    registry.subscribers(followers.app).add(FakeSubscriber(identity("root"), {LOGS_DB}))
    followers.ensure(o.SVC_DB)
    wait_until(lambda: readers.get(o.SVC_DB), timeout=1.0)
    first = readers[o.SVC_DB][0]
    first.queue.put(None)
    wait_until(lambda: len(readers[o.SVC_DB]) == 2, timeout=1.0, interval=0.01)
    assert first.closed
