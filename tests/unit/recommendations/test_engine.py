"""The engine over a live cache: findings appear and disappear with changes, keep their firstSeen, reach
listeners, are evaluated debounced and incrementally, and /recommendations serves them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import gevent
import pytest
from flask.testing import FlaskClient

from app.cache.store import Cache
from app.recommendations.engine import EngineSettings, RecommendationEngine
from app.recommendations.store import FindingAction, FindingChange
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit import objects as o
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness, wait_until

K = ResourceKind


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache() -> Cache:
    cache = Cache()
    cache.replace_all(cluster())
    return cache


@pytest.fixture
def engine(cache: Cache, clock: Clock) -> Iterator[RecommendationEngine]:
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01), clock=clock)
    engine.start()
    engine.evaluate_now()
    yield engine
    engine.stop()


def ids(engine: RecommendationEngine) -> set[str]:
    return {finding.id for finding in engine.findings()}


def with_limits(raw: dict[str, Any], version: int) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["Version"] = {"Index": version}
    raw["Spec"]["TaskTemplate"]["Resources"] = {"Limits": {"NanoCPUs": 10**9, "MemoryBytes": 1 << 26},
                                                "Reservations": {"NanoCPUs": 10**8, "MemoryBytes": 1 << 25}}
    return raw


def test_the_first_evaluation_covers_the_whole_cache(engine: RecommendationEngine) -> None:
    assert f"no-limits:service:{o.SVC_WEB}" in ids(engine)
    assert "manager-quorum:cluster:swarm" in ids(engine)
    assert f"unused-volume:volume:{o.VOL_OTHER}" in ids(engine)
    assert engine.computed_at is not None


def test_a_fixed_service_loses_its_finding_and_first_seen_survives_re_evaluation(
        engine: RecommendationEngine, cache: Cache, clock: Clock) -> None:
    web = f"no-limits:service:{o.SVC_WEB}"
    healthcheck = f"no-healthcheck:service:{o.SVC_WEB}"
    first = engine.get(healthcheck)
    assert first is not None
    clock.now += 100
    cache.upsert(K.SERVICE, with_limits(cache.get(K.SERVICE, o.SVC_WEB).raw, 21))  # type: ignore[union-attr]
    engine.evaluate_now()
    assert web not in ids(engine)
    again = engine.get(healthcheck)
    assert again is not None and (again.first_seen, again.seq) == (first.first_seen, first.seq)


def test_a_finding_that_comes_back_is_new(engine: RecommendationEngine, cache: Cache, clock: Clock) -> None:
    web = f"no-limits:service:{o.SVC_WEB}"
    original = cache.get(K.SERVICE, o.SVC_WEB).raw  # type: ignore[union-attr]
    before = engine.get(web)
    cache.upsert(K.SERVICE, with_limits(original, 21))
    engine.evaluate_now()
    clock.now += 50
    bare = copy.deepcopy(original)
    bare["Version"] = {"Index": 22}
    cache.upsert(K.SERVICE, bare)
    engine.evaluate_now()
    after = engine.get(web)
    assert before is not None and after is not None
    assert after.first_seen == before.first_seen + 50 and after.seq > before.seq


def test_listeners_get_appeared_and_disappeared(engine: RecommendationEngine, cache: Cache) -> None:
    seen: list[FindingChange] = []
    unsubscribe = engine.subscribe(seen.extend)
    cache.upsert(K.SERVICE, with_limits(cache.get(K.SERVICE, o.SVC_WEB).raw, 21))  # type: ignore[union-attr]
    engine.evaluate_now()
    assert (FindingAction.DISAPPEARED, f"no-limits:service:{o.SVC_WEB}") in {(c.action, c.finding.id) for c in seen}
    seen.clear()
    cache.upsert(K.VOLUME, o.volume("fresh"))
    engine.evaluate_now()
    assert [(c.action, c.finding.id) for c in seen] == [(FindingAction.APPEARED, "unused-volume:volume:fresh")]
    unsubscribe()
    seen.clear()
    cache.remove(K.VOLUME, "fresh")
    engine.evaluate_now()
    assert seen == []
    assert "unused-volume:volume:fresh" not in ids(engine)


def test_a_removed_service_takes_its_findings_and_frees_what_it_used(engine: RecommendationEngine,
                                                                      cache: Cache) -> None:
    assert f"unused-config:config:{o.CFG_OTHER}" not in ids(engine)
    cache.remove(K.SERVICE, o.SVC_MONITOR)
    engine.evaluate_now()
    assert not any(f.resource_id == o.SVC_MONITOR for f in engine.findings())
    assert f"unused-config:config:{o.CFG_OTHER}" in ids(engine)     # monitor was its only user


def test_task_changes_re_evaluate_their_service_only(engine: RecommendationEngine, cache: Cache,
                                                     clock: Clock) -> None:
    subjects = engine.stats.subjects
    for n in range(3):
        cache.upsert(K.TASK, o.task(o.engine_id(f"crash{n}"), o.SVC_DB, o.NODE_WORKER, slot=1, state="failed",
                                    desired="shutdown", error="boom", updated="2027-01-15T07:59:00Z"))
    engine.evaluate_now()
    assert f"restart-loop:service:{o.SVC_DB}" in ids(engine)
    assert engine.stats.subjects - subjects == 2                 # the service and the node
    clock.now += 3600                                            # the failures age out of the window
    engine._sweep_loop  # noqa: B018 (the sweep marks every service; do it by hand here)
    for entry in cache.entries(K.SERVICE):
        engine._dirty[("service", entry.id)] = None
    engine.evaluate_now()
    assert f"restart-loop:service:{o.SVC_DB}" not in ids(engine)


def test_node_label_changes_re_check_constrained_services(engine: RecommendationEngine, cache: Cache) -> None:
    raw = copy.deepcopy(cache.get(K.SERVICE, o.SVC_DB).raw)  # type: ignore[union-attr]
    raw["Version"] = {"Index": 30}
    raw["Spec"]["TaskTemplate"]["Placement"] = {"Constraints": ["node.labels.disk == ssd"]}
    cache.upsert(K.SERVICE, raw)
    engine.evaluate_now()
    finding = f"constraint-label-missing:service:{o.SVC_DB}"
    assert finding in ids(engine)
    node = o.node(o.NODE_WORKER, "worker-1", version=11)
    node["Spec"]["Labels"]["disk"] = "ssd"
    cache.upsert(K.NODE, node)
    engine.evaluate_now()
    assert finding not in ids(engine)


def test_a_pinned_service_marks_its_down_node(engine: RecommendationEngine, cache: Cache) -> None:
    raw = copy.deepcopy(cache.get(K.SERVICE, o.SVC_DB).raw)  # type: ignore[union-attr]
    raw["Version"] = {"Index": 31}
    raw["Spec"]["TaskTemplate"]["Placement"] = {"Constraints": ["node.hostname == worker-2"]}
    cache.upsert(K.SERVICE, raw)
    engine.evaluate_now()
    assert f"node-unavailable-pinned:node:{o.NODE_DOWN}" in ids(engine)
    raw = copy.deepcopy(raw)
    raw["Version"] = {"Index": 32}
    raw["Spec"]["TaskTemplate"]["Placement"] = {}
    cache.upsert(K.SERVICE, raw)
    engine.evaluate_now()
    assert f"node-unavailable-pinned:node:{o.NODE_DOWN}" not in ids(engine)


def test_evaluation_is_debounced_and_yields_between_slices(cache: Cache, clock: Clock) -> None:
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.05, slice_seconds=0.0), clock=clock)
    engine.start()
    try:
        assert engine.computed_at is None
        wait_until(lambda: engine.computed_at is not None, 2.0, message="the first debounced run")
        runs = engine.stats.runs
        ran_between: list[int] = []
        gevent.spawn(lambda: ran_between.append(engine.stats.runs))   # runs when the engine yields
        for n in range(5):
            cache.upsert(K.VOLUME, o.volume(f"v{n}"))
        gevent.sleep(0.01)   # not a wait: a window shorter than the 50 ms debounce, in which no run may start
        assert engine.stats.runs == runs                               # still waiting for the debounce
        wait_until(lambda: engine.stats.runs > runs, 2.0, message="the debounced run")
        assert engine.stats.runs == runs + 1                           # five batches, one run
        assert {f"unused-volume:volume:v{n}" for n in range(5)} <= ids(engine)
        assert ran_between                                             # other greenlets ran meanwhile
    finally:
        engine.stop()


def test_stop_ends_the_greenlets_and_the_subscription(cache: Cache) -> None:
    engine = RecommendationEngine(cache, EngineSettings(debounce=0.01))
    engine.start()
    engine.stop()
    runs = engine.stats.runs
    cache.upsert(K.VOLUME, o.volume("late"))
    gevent.sleep(0.05)   # not a wait: five debounce windows in which a stopped engine may run nothing
    assert engine.stats.runs == runs and not engine.running


# --------------------------------------------------------------------------- HTTP
@pytest.fixture
def harness() -> Iterator[Harness]:
    built = build_harness(FakeEngine(cluster()), recommendations_debounce=0.01)
    built.start()
    wait_until(lambda: built.runtime.recommendations.computed_at is not None, 5.0, message="first evaluation")
    yield built
    built.stop()


@pytest.fixture
def client(harness: Harness) -> FlaskClient:
    return harness.app.test_client()


def test_the_collection_is_the_reference_shape(client: FlaskClient) -> None:
    body = client.get("/recommendations").get_json()
    assert (body["@id"], body["@type"]) == ("/recommendations", "RecommendationCollection")
    assert body["total"] == len(body["items"]) == sum(body["summary"].values())
    severities = [item["severity"] for item in body["items"]]
    assert severities == sorted(severities, key=["critical", "warning", "info"].index)
    item = next(i for i in body["items"] if i["id"] == f"no-limits:service:{o.SVC_WEB}")
    assert item["category"] == item["check"] == "no-limits"
    assert (item["targetId"], item["targetName"], item["scope"]) == (o.SVC_WEB, "shop_web_api", "service")
    assert item["link"] == f"/services/{o.SVC_WEB}" and item["resource"] == "cpu+memory"
    assert item["firstSeen"].endswith("Z") and body["computedAt"].endswith("Z")


@pytest.mark.parametrize(("query", "check"), [
    ("severity=info", lambda f: f["severity"] == "info"),
    ("severity=critical,warning", lambda f: f["severity"] in ("critical", "warning")),
    ("kind=volume", lambda f: f["resourceType"] == "volume"),
    ("check=no-limits", lambda f: f["check"] == "no-limits"),
    ("resource=shop_db", lambda f: f["resourceName"] == "shop_db"),
    (f"resource={o.SVC_DB}", lambda f: f["resourceId"] == o.SVC_DB),
])
def test_filters(client: FlaskClient, query: str, check: Any) -> None:
    everything = client.get("/recommendations").get_json()["items"]
    body = client.get(f"/recommendations?{query}").get_json()
    assert body["items"] and all(check(item) for item in body["items"])
    assert body["total"] == sum(1 for item in everything if check(item))


@pytest.mark.parametrize("query", ["severity=urgent", "kind=stack", "check=nope"])
def test_unknown_filter_values_are_problems(client: FlaskClient, query: str) -> None:
    response = client.get(f"/recommendations?{query}")
    assert response.status_code == 400 and response.get_json()["code"] == "API012"


def test_paging(client: FlaskClient) -> None:
    everything = client.get("/recommendations").get_json()["items"]
    page = client.get("/recommendations?limit=2&offset=1").get_json()
    assert page["items"] == everything[1:3] and page["total"] == len(everything)


def test_turned_off_is_a_404() -> None:
    built = build_harness(FakeEngine(cluster()), recommendations=False)
    built.start()
    try:
        response = built.app.test_client().get("/recommendations")
        assert response.status_code == 404
        assert not built.runtime.recommendations.running
    finally:
        built.stop()


def test_the_feed_walks_every_finding_newest_first(client: FlaskClient) -> None:
    import feedparser

    total = client.get("/recommendations").get_json()["total"]
    seen: list[str] = []
    url: str | None = "/recommendations.atom?limit=3"
    while url is not None and len(seen) <= total:
        parsed = feedparser.parse(client.get(url).get_data())
        assert not parsed.bozo
        seen += [entry.id for entry in parsed.entries]
        url = next((link.href for link in parsed.feed.links if link.rel == "next"), None)
    assert len(seen) == len(set(seen)) == total
    assert all(entry_id.startswith("urn:service:recommendation:") for entry_id in seen)
