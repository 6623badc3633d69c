"""Unit-test fixtures: a synthetic cluster in engine JSON, a FakeEngine holding it, and an app whose
watcher follows that engine (started, synced, stopped at teardown)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from app.cache.store import Cache
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit.objects import Raw, cluster
from tests.unit.support import Harness, build_harness

if TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient


@pytest.fixture
def objects() -> dict[ResourceKind, list[Raw]]:
    """The synthetic cluster (a fresh copy per test)."""
    return cluster()


@pytest.fixture
def fake_engine(objects: dict[ResourceKind, list[Raw]]) -> FakeEngine:
    return FakeEngine(objects)


@pytest.fixture
def synced_cache(objects: dict[ResourceKind, list[Raw]]) -> Cache:
    """A cache filled by one full sync of the synthetic cluster, without a watcher."""
    cache = Cache()
    cache.replace_all(objects, cache.write_token(), 0.01)
    return cache


def _running(engine: FakeEngine) -> Iterator[Harness]:
    built = build_harness(engine)
    built.start()
    try:
        yield built
    finally:
        built.stop()


@pytest.fixture
def harness(fake_engine: FakeEngine) -> Iterator[Harness]:
    """App + runtime following ``fake_engine``, after its first full sync."""
    yield from _running(fake_engine)


@pytest.fixture
def app(harness: Harness) -> Flask:
    return harness.app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def unsynced(fake_engine: FakeEngine) -> Harness:
    """An app whose runtime was never started: the cache has not synced."""
    return build_harness(fake_engine)


@pytest.fixture(scope="module")
def shared_harness() -> Iterator[Harness]:
    """One synced app per test module, for tests that only read (faster than an app per test)."""
    yield from _running(FakeEngine(cluster()))


@pytest.fixture
def shared_client(shared_harness: Harness) -> FlaskClient:
    return shared_harness.app.test_client()
