"""Recommendation findings on /recommendations streams: event shape, one frame per engine slice, sync on
Last-Event-ID, nothing built without a client; and the route through the app."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient

from app.cache.store import Cache
from app.recommendations.findings import Finding
from app.recommendations.store import FindingAction, FindingChange
from app.runtime import runtime_of
from app.streams.events import ALL
from app.streams.findings import RECOMMENDATIONS, publish
from app.streams.hub import Hub
from app.streams.response import hub_of
from tests.unit.streams.test_http import app, client, open_stream  # noqa: F401 (fixtures)
from tests.unit.streams.test_hub import drain, items, parse


def finding(resource_id: str = "abc", severity: str = "warning") -> Finding:
    return Finding("no-limits", severity, "service", resource_id, "web", "No limits.", "Set limits.",
                   first_seen=1_700_000_000.0, seq=3)


def test_findings_become_one_frame_for_recommendation_streams_only(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0)
    watcher, everything = hub.open(frozenset({RECOMMENDATIONS})), hub.open(frozenset({ALL}))
    publish(hub, [FindingChange(FindingAction.APPEARED, finding("a")),
                  FindingChange(FindingAction.DISAPPEARED, finding("b"))])
    [(seq, name, data)] = drain(watcher)
    assert name == "batch" and seq == synced_cache.history.last_seq
    assert [(d["type"], d["action"], d["id"]) for d in data] == [("recommendation", "create", "no-limits:service:a"),
                                                                ("recommendation", "remove", "no-limits:service:b")]
    assert data[0]["@type"] == "Finding" and data[0]["resource"]["severity"] == "warning"
    assert drain(everything) == []


def test_a_lone_finding_goes_as_a_recommendation_event(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0)
    watcher = hub.open(frozenset({RECOMMENDATIONS}))
    publish(hub, [FindingChange(FindingAction.UPDATED, finding(severity="critical"))])
    [(_, name, data)] = drain(watcher)
    assert name == "recommendation" and data["action"] == "update" and data["resource"]["severity"] == "critical"


def test_any_last_event_id_on_the_findings_stream_gets_sync(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0)
    watcher = hub.open(frozenset({RECOMMENDATIONS}))
    frames = list(hub.replay(watcher, str(synced_cache.history.last_seq), replayable=False))
    assert [name for _, name, _ in parse(b"".join(frames))] == ["sync"]


def test_the_recommendations_url_streams_engine_findings(app: Flask, client: FlaskClient) -> None:  # noqa: F811
    stream = open_stream(client, "/recommendations")
    engine = runtime_of(app).recommendations
    for listener in list(engine._listeners):     # what the engine does after an evaluation slice
        listener([FindingChange(FindingAction.APPEARED, finding("live"))])
    assert [d["id"] for d in items(stream.events())] == ["no-limits:service:live"]
    assert hub_of(app).open_streams == 1
    stream.close()
