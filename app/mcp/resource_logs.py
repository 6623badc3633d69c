"""Log URI subscriptions: one follower greenlet per service whose ``service://services/<id>/logs`` some
subscriber wants, notifying ``updated`` when new lines arrive.

A follower opens the service's engine follow stream from "now" (as the REST live tail does without a
start, ``app.logs.tailing.open_follow``), and each batch of lines becomes one coalesced ``updated`` (at most
one per subscriber and URI per :data:`~app.mcp.notifications.LOG_WINDOW`) to the subscribers that want the
URI (by id or by name) and may read the service. Every :data:`CHECK_EVERY` seconds it asks whether anyone
still wants the URI; after two checks in a row with nobody it ends (closing the engine stream). A stream the
engine ends (the service's tasks all gone, an engine restart) is reopened at the next check while the
service exists and is wanted. At most :data:`MAX_FOLLOWERS` services are followed at once: a subscription
beyond is refused with an error naming the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
from flask import Flask

from app.cache.store import Cache
from app.engine.logs import LogReader
from app.logs.facility import log_facility
from app.logs.tailing import open_follow
from app.logs.targets import service_target
from app.logs.timestamps import now_ns
from app.mcp import registry, uris
from app.mcp.notifications import LOG_WINDOW, Notifier
from app.resources import ResourceKind

log = logging.getLogger(__name__)

MAX_FOLLOWERS = 32
CHECK_EVERY = 3.0
IDLE_CHECKS = 2           # checks in a row with no subscriber before a follower ends
_EXTENSION_KEY = "shoal.mcp.log_followers"


class FollowerLimit(Exception):
    """All :data:`MAX_FOLLOWERS` followers run and the service is not one of them."""


class LogFollowers:
    def __init__(self, app: Flask, cache: Cache, notifier: Notifier, *, check_every: float = CHECK_EVERY,
                 max_followers: int = MAX_FOLLOWERS,
                 open_reader: Callable[[str], LogReader] | None = None) -> None:
        self.app = app
        self.cache = cache
        self.notifier = notifier
        self.check_every = check_every
        self.max_followers = max_followers
        self._open_reader = open_reader or self._engine_reader
        self._followers: dict[str, gevent.Greenlet] = {}
        self.notified = 0

    @property
    def following(self) -> frozenset[str]:
        return frozenset(service_id for service_id, greenlet in self._followers.items() if not greenlet.dead)

    def ensure(self, service_id: str) -> None:
        """Follow the service's logs unless already followed; :class:`FollowerLimit` at the cap."""
        current = self._followers.get(service_id)
        if current is not None and not current.dead:
            return
        self._followers = {sid: g for sid, g in self._followers.items() if not g.dead}
        if len(self._followers) >= self.max_followers:
            raise FollowerLimit(f"at most {self.max_followers} service log URIs are followed at once")
        self._followers[service_id] = gevent.spawn(self._follow, service_id)

    def stop(self) -> None:
        followers, self._followers = list(self._followers.values()), {}
        gevent.killall(followers, block=True, timeout=2)

    # ------------------------------------------------------------------ one service
    def _engine_reader(self, service_id: str) -> LogReader:
        entry = self.cache.get(ResourceKind.SERVICE, service_id)
        if entry is None:
            raise LookupError(service_id)
        return open_follow(log_facility(self.app).engine, [service_target(entry)], now_ns(), None)[0]

    def _uris(self, service_id: str) -> tuple[str, ...]:
        entry = self.cache.get(ResourceKind.SERVICE, service_id)
        by_id = uris.logs_uri(service_id)
        return (by_id, uris.logs_uri(entry.name)) if entry is not None and entry.name != service_id else (by_id,)

    def wanted(self, service_id: str) -> bool:
        forms = self._uris(service_id)
        return any(subscriber.wants(uri) for subscriber in registry.subscribers(self.app) for uri in forms)

    def lines_arrived(self, service_id: str) -> None:
        """New lines: one coalesced ``updated`` per subscriber that wants the URI and may read the service."""
        entry = self.cache.get(ResourceKind.SERVICE, service_id)
        if entry is None:
            return
        forms = self._uris(service_id)
        for subscriber in list(registry.subscribers(self.app)):
            for uri in forms:
                if subscriber.wants(uri) and self.notifier.access_of(subscriber.identity).can_read(entry, self.cache):
                    self.notifier.due(subscriber, uri, LOG_WINDOW)
                    self.notified += 1

    def _pump(self, service_id: str) -> None:
        reader = self._open_reader(service_id)
        try:
            for batch in reader.batches():
                if batch:
                    self.lines_arrived(service_id)
        finally:
            reader.close()

    def _follow(self, service_id: str) -> None:
        pump: gevent.Greenlet | None = None
        idle = 0
        try:
            while True:
                if pump is None or pump.dead:
                    if pump is not None:   # the engine ended the stream: wait a check before reopening it
                        if pump.exception is not None:
                            log.info("MCP log follower stream ended",
                                     extra={"service": service_id, "error": str(pump.exception)})
                        gevent.sleep(self.check_every)
                    if self.cache.get(ResourceKind.SERVICE, service_id) is None:
                        return
                    pump = gevent.spawn(self._pump, service_id)
                pump.join(timeout=self.check_every)
                idle = 0 if self.wanted(service_id) else idle + 1
                if idle >= IDLE_CHECKS:
                    return
        finally:
            if pump is not None:
                pump.kill(block=True, timeout=2)


def followers(app: Flask) -> LogFollowers | None:
    found = app.extensions.get(_EXTENSION_KEY)
    return found if isinstance(found, LogFollowers) else None


def init(app: Flask, notifier: Notifier) -> LogFollowers:
    existing = followers(app)
    if existing is not None:
        return existing
    from app.runtime import runtime_of
    made = LogFollowers(app, runtime_of(app).cache, notifier)
    app.extensions[_EXTENSION_KEY] = made
    return made


def follow_logs(app: Flask, service_id: str) -> None:
    """Start (or keep) the follower of one service's logs (``FollowerLimit`` at the cap). For a transport
    whose subscriptions do not pass through ``resources/subscribe`` (2026 ``subscriptions/listen``)."""
    made = followers(app)
    if made is None:
        from app.mcp.notifications import init as init_notifications
        made = init(app, init_notifications(app))
    made.ensure(service_id)
