"""A page of 200 archived history entries does not hold the hub (docs/figures.md): the page is served
through the app on a real store file while a ticker greenlet measures the hub's longest hold.

The hold is measured in the hub thread's CPU time between two wake-ups of the ticker (``time.thread_time``),
the work done without letting go: wall-clock gaps on a shared, loaded machine also count the process being
descheduled. The same page built without slices is the control: it holds the hub far longer, so the measure
can fail."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest

from app.cache.history import Action, Change
from app.history import entries
from app.resources import ResourceKind
from app.store.database import FILE_NAME, Database
from tests.fakes import FakeEngine
from tests.unit.objects import cluster, service
from tests.unit.support import Harness, build_harness

ARCHIVED = 600
LIMIT_MS = 30.0


class Ticker:
    """The longest CPU time the hub thread spent between two wake-ups of a greenlet sleeping 1 ms."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.wakeups = 0
        self._last = time.thread_time()
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            gevent.sleep(0.001)
            now = time.thread_time()
            self.longest, self._last = max(self.longest, now - self._last), now
            self.wakeups += 1

    def reset(self) -> None:
        gevent.sleep(0.002)
        self.longest, self.wakeups, self._last = 0.0, 0, time.thread_time()

    def read_ms(self) -> float:
        gevent.sleep(0.002)   # the ticker notes the end of the last hold
        return self.longest * 1000

    def stop(self) -> None:
        self._greenlet.kill()


def _heavy_service_updates(path: Path) -> None:
    """Service updates whose diffs are costly (200 environment variables and 100 labels changed): ~1 ms of
    diff per entry, the heavy end of what a page of 200 builds."""
    before = service("s" * 25, "web")
    before["Spec"]["TaskTemplate"]["ContainerSpec"]["Env"] = [f"VAR_{i}=value-{i}" for i in range(200)]
    before["Spec"]["Labels"] = {f"label.{i}": f"v{i}" for i in range(100)}
    after = copy.deepcopy(before)
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Env"] = [f"VAR_{i}=other-{i}" for i in range(200)]
    after["Spec"]["Labels"] = {f"label.{i}": f"w{i}" for i in range(100)}
    database = Database.open(str(path))
    start = time.time() - ARCHIVED
    database.write([Change(seq, ResourceKind.SERVICE, Action.UPDATE, before["ID"], "web", start + seq, before, after,
                           20_000) for seq in range(1, ARCHIVED + 1)])
    database.close()


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    directory = tmp_path_factory.mktemp("store")
    _heavy_service_updates(directory / FILE_NAME)
    harness = build_harness(FakeEngine(cluster()), data_dir=str(directory), history_size=100)
    harness.start(timeout=30)
    try:
        yield harness
    finally:
        harness.stop()


def _page_hold(harness: Harness, url: str) -> tuple[float, list[int]]:
    entries._memo.clear()     # built from the records, as a page nobody asked for yet
    ticker = Ticker()
    try:
        ticker.reset()
        response = harness.app.test_client().get(url)
        held = ticker.read_ms()
        assert ticker.wakeups > 3
    finally:
        ticker.stop()
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    return held, [item["id"] for item in response.get_json()["items"]]


def test_the_page_comes_from_the_archive(archived: Harness) -> None:
    assert archived.cache.history.get(300) is None     # not in the ring: the store file serves it
    _, ids = _page_hold(archived, "/history?limit=200&before=401")
    assert ids == list(range(400, 200, -1))


def test_a_200_entry_archive_page_never_holds_the_hub_30_ms(archived: Harness) -> None:
    holds = [_page_hold(archived, "/history?limit=200&before=401")[0] for _ in range(3)]
    assert sorted(holds)[1] < LIMIT_MS, holds   # the median of three pages


def test_without_slices_the_same_page_holds_the_hub_far_longer(archived: Harness,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries, "SLICE_SECONDS", 3600.0)
    held, ids = _page_hold(archived, "/history?limit=200&before=401")
    assert held > 2 * LIMIT_MS and len(ids) == 200, held


def test_a_page_built_in_slices_is_the_page_built_at_once(archived: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    client = archived.app.test_client()
    entries._memo.clear()
    sliced = client.get("/history?limit=200&before=401")
    monkeypatch.setattr(entries, "SLICE_SECONDS", 3600.0)
    entries._memo.clear()
    whole = client.get("/history?limit=200&before=401")
    assert sliced.get_json()["items"][0]["changes"]         # entries with their diffs, not empty shells
    assert sliced.get_data() == whole.get_data() and sliced.headers["ETag"] == whole.headers["ETag"]
