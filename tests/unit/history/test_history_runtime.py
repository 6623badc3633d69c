"""The history of a running app: it survives an engine reconnect (the ring is the cache's, which a
resync reconciles instead of rebuilding) and its size is the configured ``server.history_size``."""

from __future__ import annotations

import copy

from flask.testing import FlaskClient

from app.cache.history import Action
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness, wait_until


def test_history_survives_an_engine_reconnect(harness: Harness, client: FlaskClient) -> None:
    engine = harness.engine
    before = client.get("/history?limit=200").get_json()["items"]
    syncs = harness.runtime.watcher.stats.full_syncs
    engine.available = False
    engine.close()                                  # the event stream ends: the watcher reconnects
    wait_until(lambda: not harness.cache.freshness.connected, 2, message="the disconnect")
    service = copy.deepcopy(engine.objects[ResourceKind.SERVICE][o.SVC_WEB])
    service["Spec"]["Mode"]["Replicated"]["Replicas"] = 9
    service["Version"]["Index"] += 1
    engine.objects[ResourceKind.SERVICE][o.SVC_WEB] = service   # changed while the engine was unreachable
    engine.available = True
    wait_until(lambda: harness.runtime.watcher.stats.full_syncs > syncs, 5, message="the resync")
    after = client.get("/history?limit=200").get_json()["items"]
    assert after[-len(before):] == before, "the records before the reconnect are all still served"
    newer = after[:-len(before)]
    assert [item["summary"] for item in newer if item["resourceId"] == o.SVC_WEB and item["action"] == "update"] \
        == ["replicas 2→9"]
    assert not [item for item in newer if item["action"] == "create"], "a resync is no re-creation"


def test_the_ring_size_is_the_configured_history_size() -> None:
    harness = build_harness(FakeEngine(cluster()), history_size=100)
    harness.start()
    try:
        for index in range(150):
            service = copy.deepcopy(harness.engine.objects[ResourceKind.SERVICE][o.SVC_WEB])
            service["Version"]["Index"] += index + 1
            service["Spec"]["Labels"]["n"] = str(index)
            harness.cache.upsert(ResourceKind.SERVICE, service)
        client = harness.app.test_client()
        ids = []
        url: str | None = "/history?limit=200"
        while url:
            body = client.get(url).get_json()
            ids += [item["id"] for item in body["items"]]
            url = body.get("next")
        newest_own = next(c.seq for c in harness.cache.history.newest_first() if c.action is not Action.REF_CHANGED)
        assert len(ids) == 100 and ids[0] == newest_own      # the related changes the updates caused: a lane apart
        assert client.get(f"/history/{ids[-1] - 1}").status_code == 404
    finally:
        harness.stop()
