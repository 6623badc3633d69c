"""The hub with a real in-memory cache: routing by scope, batching, one serialisation per batch, slow
clients, replay and the cap. ``flush`` is called directly, so no test waits on a timer except the one that
checks the timer."""

from __future__ import annotations

import copy
import json
from typing import Any

import gevent
import pytest
from jsonschema import Draft202012Validator

from app import create_app
from app.cache.store import Cache
from app.config import Settings
from app.resources import ResourceKind
from app.streams.client import Client
from app.streams.events import ALL, kind_key, object_key, stack_key
from app.streams.hub import Hub, StreamCapReached, parse_event_id
from app.streams.schemas import event_components
from tests.unit.objects import (
    CFG_OTHER,
    CFG_SHOP,
    NODE_WORKER,
    SEC_SHOP,
    SVC_MONITOR,
    SVC_WEB,
    TASK_WEB_1,
    config,
    engine_id,
    secret,
    service,
    task,
)

Event = tuple[int | None, str | None, Any]


def parse(chunk: bytes) -> list[Event]:
    """SSE frames → (id, event, data); comments and retry lines are dropped."""
    events: list[Event] = []
    for block in chunk.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":") and ": " in line:
                name, value = line.split(": ", 1)
                fields[name] = value
        if "data" in fields:
            events.append((int(fields["id"]) if "id" in fields else None, fields.get("event"),
                           json.loads(fields["data"])))
    return events


def drain(client: Client) -> list[Event]:
    chunk = client.take(0)
    return parse(chunk) if chunk else []


def items(events: list[Event]) -> list[dict[str, Any]]:
    """Single events and batch members, flattened."""
    flat: list[dict[str, Any]] = []
    for _, name, data in events:
        flat += data if name == "batch" else [data]
    return flat


@pytest.fixture
def hub(synced_cache: Cache) -> Hub:
    return Hub(synced_cache, batch_interval=60.0)   # never fires by itself here: tests flush


def bump(cache: Cache, version: int, service_id: str = SVC_MONITOR) -> int:
    """A new version of a service (monitor: in no stack, so the write records this one change alone)."""
    entry = cache.get(ResourceKind.SERVICE, service_id)
    assert entry is not None
    raw = copy.deepcopy(entry.raw)
    raw["Version"]["Index"] = version
    [change] = [c for c in cache.upsert(ResourceKind.SERVICE, raw) if c.id == service_id]
    return change.seq


def scale(cache: Cache, version: int) -> None:
    bump(cache, version)


def test_a_list_stream_gets_its_kind_only(hub: Hub, synced_cache: Cache) -> None:
    services = hub.open(frozenset({kind_key(ResourceKind.SERVICE)}))
    configs = hub.open(frozenset({kind_key(ResourceKind.CONFIG)}))
    seq = bump(synced_cache, 100)
    hub.flush()
    got = drain(services)
    assert [(name, data["action"], data["id"]) for _, name, data in got] == [("service", "update", SVC_MONITOR)]
    assert got[0][0] == seq
    assert drain(configs) == []


def test_event_fields_are_exactly_the_spec(hub: Hub, synced_cache: Cache) -> None:
    client = hub.open(frozenset({object_key(ResourceKind.SERVICE, SVC_WEB)}))
    bump(synced_cache, 101, SVC_WEB)
    hub.flush()
    [(_, name, data)] = drain(client)
    assert name == "service"
    assert list(data) == ["@id", "@type", "type", "action", "id", "resource"]
    assert data["@id"] == f"/services/{SVC_WEB}" and data["@type"] == "Service" and data["type"] == "service"
    assert data["action"] == "update" and data["id"] == SVC_WEB
    assert data["resource"]["@id"] == f"/services/{SVC_WEB}" and data["resource"]["Version"]["Index"] == 101
    assert "RunningTasks" in data["resource"]   # the REST representation, not the bare engine object


def test_lone_event_goes_as_itself_several_as_one_batch_with_the_highest_id(hub: Hub, synced_cache: Cache) -> None:
    client = hub.open(frozenset({ALL}))
    scale(synced_cache, 102)
    synced_cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=50))
    hub.flush()
    [(seq, name, data)] = drain(client)
    assert name == "batch" and isinstance(data, list) and len(data) >= 2
    assert seq == synced_cache.history.last_seq
    assert {(d["type"], d["action"]) for d in data} >= {("service", "update"), ("config", "update")}


def test_ref_changed_reaches_the_subscribers_of_the_referencing_object(hub: Hub, synced_cache: Cache) -> None:
    web = hub.open(frozenset({object_key(ResourceKind.SERVICE, SVC_WEB)}))
    shop_config = hub.open(frozenset({object_key(ResourceKind.CONFIG, CFG_SHOP)}))
    synced_cache.upsert(ResourceKind.TASK, task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="failed", version=90))
    synced_cache.upsert(ResourceKind.SERVICE, service(SVC_MONITOR, "monitor", replicas=None, version=91,
                                                      configs=((CFG_SHOP, "shop_nginx"),)))   # now uses it
    hub.flush()
    assert [(d["type"], d["action"], d["id"]) for d in items(drain(web))] == [("service", "ref_changed", SVC_WEB)]
    assert [(d["type"], d["action"]) for d in items(drain(shop_config))] == [("config", "ref_changed")]


def test_a_stack_stream_carries_its_members_and_their_tasks_only(hub: Hub, synced_cache: Cache) -> None:
    shop = hub.open(frozenset({stack_key("shop")}))
    synced_cache.upsert(ResourceKind.TASK, task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="failed", version=92))
    synced_cache.upsert(ResourceKind.SECRET, secret(SEC_SHOP, "shop_db_password", stack="shop", version=93))
    synced_cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=94))   # not a member
    synced_cache.upsert(ResourceKind.SERVICE, service(SVC_MONITOR, "monitor", replicas=None, version=95))
    hub.flush()
    events = items(drain(shop))
    seen = {(d["type"], d["id"]) for d in events}
    stack = [d for d in events if d["type"] == "stack"][-1]
    # A stack event's resource is the stack as listed (member ids): its members' events carry their state.
    assert stack["resource"]["@id"] == "/stacks/shop" and SVC_WEB in stack["resource"]["services"]
    assert (ResourceKind.TASK.value, TASK_WEB_1) in seen and ("secret", SEC_SHOP) in seen
    assert ("service", SVC_WEB) in seen          # ref_changed of the task's service
    assert ("config", CFG_OTHER) not in seen and ("service", SVC_MONITOR) not in seen


def test_remove_carries_the_last_known_state_and_secrets_stay_redacted(hub: Hub, synced_cache: Cache) -> None:
    client = hub.open(frozenset({kind_key(ResourceKind.SECRET)}))
    synced_cache.upsert(ResourceKind.SECRET, secret(SEC_SHOP, "shop_db_password", stack="shop", version=96))
    synced_cache.remove(ResourceKind.SECRET, SEC_SHOP)
    hub.flush()
    events = items(drain(client))
    assert [d["action"] for d in events] == ["update", "remove"]
    assert events[1]["resource"]["Spec"]["Name"] == "shop_db_password"
    assert all("Data" not in d["resource"]["Spec"] for d in events)


def test_each_event_is_serialised_once_and_same_scope_clients_share_the_frame(hub: Hub,
                                                                               synced_cache: Cache) -> None:
    clients = [hub.open(frozenset({ALL})) for _ in range(20)]
    others = [hub.open(frozenset({kind_key(ResourceKind.SERVICE)})) for _ in range(5)]
    scale(synced_cache, 103)
    synced_cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=51))
    changes = synced_cache.history.last_seq
    hub.flush()
    frames = [c.take(0) for c in clients]
    assert all(frame is frames[0] for frame in frames)      # one bytes object for the whole group
    assert all(o.take(0) for o in others)
    assert hub.stats.events_built <= changes and hub.stats.events_built == len(items(parse(frames[0] or b"")))


def test_a_slow_client_gets_sync_and_loses_its_backlog_without_touching_others(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0, queue_frames=3)
    slow, fast = hub.open(frozenset({ALL})), hub.open(frozenset({ALL}))
    received: list[Event] = []
    for version in range(200, 205):
        scale(synced_cache, version)
        hub.flush()
        received += drain(fast)
    assert len(received) == 5 and all(name == "service" for _, name, _ in received)
    backlog = drain(slow)
    assert [name for _, name, _ in backlog] == ["sync", "service"]
    assert backlog[0][2] == {"type": "sync", "action": "full_sync", "id": ""}
    assert backlog[1][0] == synced_cache.history.last_seq and slow.overflows == 1


def test_a_client_never_gets_changes_from_before_it_connected(hub: Hub, synced_cache: Cache) -> None:
    early = hub.open(frozenset({ALL}))
    scale(synced_cache, 104)               # pending in the hub while the next client connects
    late = hub.open(frozenset({ALL}))
    hub.flush()
    assert drain(early) and drain(late) == []


def test_no_client_no_work(hub: Hub, synced_cache: Cache) -> None:
    scale(synced_cache, 105)
    hub.flush()
    assert hub.stats.events_built == 0 and hub.stats.flushes == 0


def test_the_batch_window_timer_delivers_within_the_interval(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=0.05)
    client = hub.open(frozenset({ALL}))
    scale(synced_cache, 106)
    scale(synced_cache, 107)
    chunk = client.take(2.0)
    assert chunk is not None
    [(_, name, data)] = parse(chunk)
    assert name == "batch" and [d["resource"]["Version"]["Index"] for d in data] == [106, 107]


def test_replay_gives_exactly_the_missed_events_of_the_scope(hub: Hub, synced_cache: Cache) -> None:
    last_seen = synced_cache.history.last_seq
    scale(synced_cache, 110)
    synced_cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=52))
    scale(synced_cache, 111)
    client = hub.open(frozenset({kind_key(ResourceKind.SERVICE)}))
    replayed = items(parse(b"".join(hub.replay(client, str(last_seen)))))
    assert [(d["type"], d["resource"]["Version"]["Index"]) for d in replayed] == [("service", 110),
                                                                                 ("service", 111)]
    assert list(hub.replay(client, str(synced_cache.history.last_seq))) == []


@pytest.mark.parametrize("bogus", ["abc", "-1", "1e3", "99999999999", "١٢", "x" * 30, "12 13"])
def test_a_bogus_or_future_last_event_id_gets_sync(hub: Hub, bogus: str) -> None:
    client = hub.open(frozenset({ALL}))
    [(seq, name, data)] = parse(b"".join(hub.replay(client, bogus)))
    assert name == "sync" and data["action"] == "full_sync" and seq == client.after_seq


def test_an_id_older_than_the_ring_gets_sync() -> None:
    cache = Cache(history_capacity=5)
    for version in range(1, 20):
        cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=version))
    hub = Hub(cache, batch_interval=60.0)
    client = hub.open(frozenset({ALL}))
    assert [name for _, name, _ in parse(b"".join(hub.replay(client, "2")))] == ["sync"]
    assert len(items(parse(b"".join(hub.replay(client, str(cache.history.last_seq - 3)))))) == 3


def test_the_cap_refuses_one_more_and_frees_on_close(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, max_clients=3)
    clients = [hub.open(frozenset({ALL})) for _ in range(3)]
    with pytest.raises(StreamCapReached):
        hub.open(frozenset({ALL}))
    hub.close(clients[0])
    hub.close(clients[0])                   # idempotent
    assert hub.open_streams == 2
    hub.open(frozenset({ALL}))
    assert hub.stats.refused == 1


def test_shutdown_wakes_every_client(hub: Hub) -> None:
    client = hub.open(frozenset({ALL}))
    waiter = gevent.spawn(client.take, 10.0)
    gevent.sleep(0)   # one turn, not a timed wait: the waiter blocks in take before the shutdown
    hub.shutdown()
    assert waiter.get(timeout=2) is None and client.closed


@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("42", 42), (" 7 ", 7), ("", None), ("4a", None)])
def test_parse_event_id(value: str, expected: int | None) -> None:
    assert parse_event_id(value) == expected


def test_every_emitted_event_validates_against_the_published_schemas(hub: Hub, synced_cache: Cache) -> None:
    document = create_app(Settings(), configure_logging=False).test_client().get("/api").get_json()
    components = {**document["components"]["schemas"], **event_components()}
    client = hub.open(frozenset({ALL}))
    scale(synced_cache, 120)
    synced_cache.upsert(ResourceKind.TASK, task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="failed", version=121))
    synced_cache.remove(ResourceKind.SECRET, SEC_SHOP)
    hub.flush()
    [(_, name, data)] = drain(client)
    schema = {"$ref": "#/components/schemas/BatchEvent", "components": {"schemas": components}}
    errors = list(Draft202012Validator(schema).iter_errors(data))
    assert name == "batch" and not errors, errors[:3]
    assert {d["action"] for d in data} >= {"update", "ref_changed", "remove"}



def burst(cache: Cache, count: int) -> None:
    for index in range(count):
        cache.upsert(ResourceKind.CONFIG, config(engine_id(f"burst{index}"), f"burst{index}", version=index + 1))


def flush_alongside(hub: Hub) -> list[bool]:
    """Run a flush in a greenlet; another greenlet notes whether the flush was still running when it ran."""
    ran: list[bool] = []
    flusher = gevent.spawn(hub.flush)
    gevent.spawn(lambda: ran.append(flusher.dead))
    flusher.join(10)
    return ran


def test_a_burst_flush_lets_other_greenlets_run_while_building_events(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0)
    client = hub.open(frozenset({ALL}))
    burst(synced_cache, 1500)
    assert flush_alongside(hub) == [False]
    assert len(items(drain(client))) == 1500


def test_a_burst_flush_lets_other_greenlets_run_while_routing(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0)
    hub.open(frozenset({stack_key("no-such-stack")}))     # wants none of it: nothing is built, all is routed
    burst(synced_cache, 2500)
    assert flush_alongside(hub) == [False]
    assert hub.stats.events_built == 0
