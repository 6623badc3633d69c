"""Streams through the app (Flask test client, monkey-patched greenlets): negotiation, headers, routing by
URL, replay headers, the cap, keepalive, cleanup, /events and the AsyncAPI document."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from flask import Flask
from flask.testing import FlaskClient
from jsonschema import Draft7Validator

from app import create_app
from app.cache.store import Cache
from app.config import Settings
from app.resources import ResourceKind
from app.runtime import runtime_of
from app.streams.response import hub_of
from tests.unit.objects import CFG_OTHER, SVC_MONITOR, SVC_WEB, cluster, config
from tests.unit.streams.test_hub import Event, bump, items, parse

SSE = {"Accept": "text/event-stream"}
ASYNCAPI_SCHEMA = Path(__file__).resolve().parents[2] / "data" / "asyncapi-3.0.0.schema.json"


@pytest.fixture
def app() -> Flask:
    app = create_app(Settings(sse_batch_interval=0.02, sse_keepalive=0.3), configure_logging=False)
    runtime_of(app).cache.replace_all(cluster())
    return app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def cache_of(app: Flask) -> Cache:
    return runtime_of(app).cache


class Stream:
    """An open streamed response read chunk by chunk, each read bounded in time."""

    def __init__(self, client: FlaskClient, path: str, **headers: str) -> None:
        self.response = client.get(path, headers={**SSE, **headers}, buffered=False)
        self._chunks: Iterator[bytes] = self.response.iter_encoded()

    def chunk(self, timeout: float = 2.0) -> bytes:
        with gevent.Timeout(timeout, AssertionError(f"no chunk within {timeout} s")):
            return next(self._chunks)

    def events(self, timeout: float = 2.0) -> list[Event]:
        """The next chunk that carries events (keepalives skipped)."""
        deadline = gevent.get_hub().loop.now() + timeout
        while True:
            found = parse(self.chunk(max(0.01, deadline - gevent.get_hub().loop.now())))
            if found:
                return found

    def close(self) -> None:
        self.response.close()


def open_stream(client: FlaskClient, path: str, **headers: str) -> Stream:
    stream = Stream(client, path, **headers)
    assert stream.response.status_code == 200, stream.response.get_data()
    assert stream.chunk() == b"retry: 3000\n\n"
    return stream


def test_stream_headers_are_sse_without_caching_or_validators(client: FlaskClient) -> None:
    stream = open_stream(client, "/services")
    headers = stream.response.headers
    assert headers["Content-Type"] == "text/event-stream"
    assert headers["X-Accel-Buffering"] == "no"
    for absent in ("Cache-Control", "ETag", "Last-Modified", "Content-Length"):
        assert absent not in headers
    stream.close()


def test_a_list_stream_delivers_a_change_within_the_batch_window(app: Flask, client: FlaskClient) -> None:
    stream = open_stream(client, "/services")
    gevent.spawn_later(0.01, bump, cache_of(app), 300)
    [(seq, name, data)] = stream.events(1.0)
    assert name == "service" and data["id"] == SVC_MONITOR and seq == cache_of(app).history.last_seq
    stream.close()


def test_a_detail_stream_carries_that_object_only(app: Flask, client: FlaskClient) -> None:
    stream = open_stream(client, f"/services/{SVC_WEB}")
    bump(cache_of(app), 301)                    # another service
    bump(cache_of(app), 302, SVC_WEB)
    assert {d["id"] for d in items(stream.events())} == {SVC_WEB}
    stream.close()


def test_a_detail_stream_of_a_missing_object_is_404(client: FlaskClient) -> None:
    response = client.get("/services/nope", headers=SSE)
    assert response.status_code == 404 and response.mimetype == "application/problem+json"


def test_events_types_filter(app: Flask, client: FlaskClient) -> None:
    stream = open_stream(client, "/events?types=config, Node")
    bump(cache_of(app), 303)
    cache_of(app).upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=77))
    assert [(d["type"], d["id"]) for d in items(stream.events())] == [("config", CFG_OTHER)]
    stream.close()


def test_events_with_an_unknown_type_is_400_sse002(client: FlaskClient) -> None:
    response = client.get("/events?types=service,dragon", headers=SSE)
    assert response.status_code == 400
    assert response.get_json()["type"] == "/api/errors/SSE002" and "dragon" in response.get_json()["detail"]


def test_events_is_stream_only(client: FlaskClient) -> None:
    response = client.get("/events", headers={"Accept": "application/json"})
    assert response.status_code == 406 and response.get_json()["type"] == "/api/errors/API002"
    for accept in ("*/*", None):    # never an endless body by default (fuzzers, curl): JSON → API002
        response = client.get("/events", headers={"Accept": accept} if accept else {})
        assert response.status_code == 406 and response.get_json()["type"] == "/api/errors/API002"


@pytest.mark.parametrize("path", ["/api/errors", f"/services/{SVC_WEB}/tasks", "/api"])
def test_endpoints_without_streams_still_answer_406_api001(client: FlaskClient, path: str) -> None:
    response = client.get(path, headers=SSE)
    assert response.status_code == 406 and response.get_json()["type"] == "/api/errors/API001"


def test_last_event_id_header_and_query_replay_exactly_the_missed_events(app: Flask, client: FlaskClient) -> None:
    cache = cache_of(app)
    seen = cache.history.last_seq
    missed = [bump(cache, 310), bump(cache, 311)]
    for stream in (open_stream(client, "/services", **{"Last-Event-ID": str(seen)}),
                   open_stream(client, f"/services?lastEventId={seen}")):
        [(seq, name, data)] = stream.events()
        assert name == "batch" and seq == missed[-1]
        assert [d["resource"]["Version"]["Index"] for d in data] == [310, 311]
        stream.close()


def test_a_bogus_last_event_id_gets_sync(client: FlaskClient) -> None:
    stream = open_stream(client, "/events", **{"Last-Event-ID": "not-a-number"})
    [(_, name, data)] = stream.events()
    assert name == "sync" and data == {"type": "sync", "action": "full_sync", "id": ""}
    stream.close()


def test_the_cap_answers_429_sse001_with_retry_after_and_frees_on_close(app: Flask, client: FlaskClient) -> None:
    hub_of(app).max_clients = 2
    streams = [open_stream(client, "/events"), open_stream(client, "/nodes")]
    refused = client.get("/services", headers=SSE)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
    assert refused.get_json()["type"] == "/api/errors/SSE001"
    streams[0].close()
    assert hub_of(app).open_streams == 1
    open_stream(client, "/services").close()
    streams[1].close()
    assert hub_of(app).open_streams == 0


def test_idle_streams_get_keepalive_comments(client: FlaskClient) -> None:
    stream = open_stream(client, "/events")
    assert stream.chunk(2.0) == b":keepalive\n\n"
    stream.close()


def test_head_registers_no_stream(app: Flask, client: FlaskClient) -> None:
    response = client.head("/events", headers=SSE)
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    assert hub_of(app).open_streams == 0


def test_open_streams_are_counted_in_self_metrics(client: FlaskClient) -> None:
    stream = open_stream(client, "/events")
    assert "shoal_open_streams 1.0" in client.get("/-/metrics").get_data(as_text=True)
    stream.close()
    assert "shoal_open_streams 0.0" in client.get("/-/metrics").get_data(as_text=True)


# --------------------------------------------------------------------------- documents
def asyncapi(client: FlaskClient) -> dict[str, Any]:
    response = client.get("/api/asyncapi.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    document: dict[str, Any] = response.get_json()
    return document


def test_api_links_the_asyncapi_document(client: FlaskClient) -> None:
    document = client.get("/api").get_json()
    assert document["x-asyncapi"] == "/api/asyncapi.json"
    assert document["externalDocs"]["url"] == "/api/asyncapi.json"
    assert "application/json" in document["paths"]["/api/asyncapi"]["get"]["responses"]["200"]["content"]


def test_the_asyncapi_document_is_valid_asyncapi_3(client: FlaskClient) -> None:
    schema = json.loads(ASYNCAPI_SCHEMA.read_text())
    document = asyncapi(client)
    assert document["asyncapi"] == "3.0.0"
    errors = list(Draft7Validator(schema).iter_errors(document))
    assert not errors, [e.message for e in errors[:3]]
    broken = copy.deepcopy(document)
    del broken["operations"]["receive_events"]["action"]
    broken["channels"]["events"]["messages"]["sync"]["payload"] = 12
    assert list(Draft7Validator(schema).iter_errors(broken))    # the validation bites


def test_asyncapi_external_docs_are_absolute_where_clients_reach_the_service(client: FlaskClient) -> None:
    assert asyncapi(client)["info"]["externalDocs"]["url"] == "http://localhost/api"   # the request's origin
    behind = create_app(Settings(external_url="https://shoal.example/ops", base_path="/x"), configure_logging=False)
    document = behind.test_client().get("/x/api/asyncapi.json", headers={"Host": "internal:9000"}).get_json()
    assert document["info"]["externalDocs"]["url"] == "https://shoal.example/ops/x/api"   # server.external_url


def test_every_asyncapi_channel_is_a_stream_url_of_api(client: FlaskClient) -> None:
    paths = client.get("/api").get_json()["paths"]
    for channel in asyncapi(client)["channels"].values():
        operation = paths[channel["address"]]["get"]
        assert "text/event-stream" in operation["responses"]["200"]["content"]
        assert "429" in operation["responses"]


def test_asyncapi_refs_all_resolve(client: FlaskClient) -> None:
    document = asyncapi(client)
    text = json.dumps(document)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node: Any = document
        for key in ref.lstrip("#/").split("/"):
            node = node[key]
        assert node is not None, ref
