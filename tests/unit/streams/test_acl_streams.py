"""Streams under an ACL policy (docs/streams.md, docs/acl.md): a restricted client gets only the events it may read
(at fan-out and at replay, removals judged by their last known state, findings by their key), ``sync``
always passes, clients with the same grants share a frame, unrestricted clients keep the shared fast path,
and a detail stream of an unreadable object is 403 ACL001."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.acl.evaluator import UNRESTRICTED, Access, access_for
from app.acl.policy import parse_policy
from app.auth.identity import Identity
from app.cache.store import Cache
from app.recommendations.findings import Finding
from app.recommendations.store import FindingAction, FindingChange
from app.resources import ResourceKind
from app.streams.events import ALL, kind_key
from app.streams.findings import RECOMMENDATIONS, publish
from app.streams.hub import Hub
from tests.fakes import FakeEngine
from tests.unit.objects import (
    CFG_OTHER,
    CFG_SHOP,
    NODE_WORKER,
    SEC_SHOP,
    SVC_MONITOR,
    SVC_WEB,
    TASK_WEB_1,
    cluster,
    config,
    task,
)
from tests.unit.streams.test_hub import drain, items, parse
from tests.unit.support import build_harness

POLICY = parse_policy({"grants": [
    {"resources": ["stack:shop"], "audience": ["user:alice", "user:alice2"], "permissions": ["read"]},
    {"resources": ["service:monitor"], "audience": ["user:bob"], "permissions": ["read"]},
    {"resources": ["node:*"], "audience": ["user:erin"], "permissions": ["read"]},
    {"resources": ["swarm:cluster"], "audience": ["user:erin"], "permissions": ["read"]},
]})


def access(user: str) -> Access:
    return access_for(Identity(user, user, "headers"), POLICY, auth_enabled=True)


def seen(events: list[Any]) -> set[tuple[str, str, str]]:
    return {(d["type"], d["action"], d["id"]) for d in items(events) if d.get("type") != "sync"}


@pytest.fixture
def hub(synced_cache: Cache) -> Hub:
    return Hub(synced_cache, batch_interval=60.0)


def touch(cache: Cache, base: int = 70) -> None:
    """Changes inside and outside the shop stack: a shop config and task, the monitor service, another
    config."""
    cache.upsert(ResourceKind.CONFIG, config(CFG_SHOP, "shop_nginx", stack="shop", version=base))
    cache.upsert(ResourceKind.TASK, task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="failed", version=base + 1))
    entry = cache.get(ResourceKind.SERVICE, SVC_MONITOR)
    assert entry is not None
    raw = copy.deepcopy(entry.raw)
    raw["Version"]["Index"] = base + 2
    cache.upsert(ResourceKind.SERVICE, raw)
    cache.upsert(ResourceKind.CONFIG, config(CFG_OTHER, "app_settings", version=base + 3))


def test_a_restricted_client_gets_only_what_it_may_read(hub: Hub, synced_cache: Cache) -> None:
    alice = hub.open(frozenset({ALL}), access=access("alice"))
    bob = hub.open(frozenset({ALL}), access=access("bob"))
    dave = hub.open(frozenset({ALL}), access=access("dave"))
    everyone = hub.open(frozenset({ALL}), access=UNRESTRICTED)
    touch(synced_cache)
    hub.flush()
    got_alice, got_bob, got_all = seen(drain(alice)), seen(drain(bob)), seen(drain(everyone))
    assert ("config", "update", CFG_SHOP) in got_alice and ("task", "update", TASK_WEB_1) in got_alice
    assert not {i for i in got_alice if i[2] in (SVC_MONITOR, CFG_OTHER)}
    assert got_bob == {("service", "update", SVC_MONITOR)}
    assert drain(dave) == []
    assert got_alice | got_bob <= got_all and ("config", "update", CFG_OTHER) in got_all


def test_nothing_unreadable_appears_in_the_frame_bytes(hub: Hub, synced_cache: Cache) -> None:
    alice = hub.open(frozenset({ALL}), access=access("alice"))
    touch(synced_cache)
    hub.flush()
    chunk = (alice.take(0) or b"").decode()
    assert "shop_nginx" in chunk
    for forbidden in ("monitor", "app_settings", SVC_MONITOR, CFG_OTHER):
        assert forbidden not in chunk


def test_a_task_event_names_no_node_its_reader_may_not_read(hub: Hub, synced_cache: Cache) -> None:
    alice = hub.open(frozenset({kind_key(ResourceKind.TASK)}), access=access("alice"))
    everyone = hub.open(frozenset({kind_key(ResourceKind.TASK)}))
    synced_cache.upsert(ResourceKind.TASK, task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="failed", version=75))
    hub.flush()
    mine, full = (alice.take(0) or b"").decode(), (everyone.take(0) or b"").decode()
    assert '"NodeHostname":"worker-1"' in full and '"ServiceName":"shop_web_api"' in full
    assert '"NodeHostname":""' in mine and "worker-1" not in mine and '"ServiceName":"shop_web_api"' in mine


def test_a_removal_is_judged_by_its_last_known_state(hub: Hub, synced_cache: Cache) -> None:
    alice = hub.open(frozenset({kind_key(ResourceKind.SECRET)}), access=access("alice"))
    bob = hub.open(frozenset({kind_key(ResourceKind.SECRET)}), access=access("bob"))
    synced_cache.remove(ResourceKind.SECRET, SEC_SHOP)
    hub.flush()
    assert seen(drain(alice)) == {("secret", "remove", SEC_SHOP)}
    assert drain(bob) == []


def test_a_task_whose_service_went_is_judged_by_its_stack_label(hub: Hub, synced_cache: Cache) -> None:
    alice = hub.open(frozenset({kind_key(ResourceKind.TASK)}), access=access("alice"))
    raw = task(TASK_WEB_1, SVC_WEB, NODE_WORKER, state="shutdown", version=80)
    raw["Spec"]["ContainerSpec"]["Labels"] = {"com.docker.stack.namespace": "shop"}
    synced_cache.upsert(ResourceKind.TASK, raw)
    synced_cache.remove(ResourceKind.SERVICE, SVC_WEB)
    synced_cache.remove(ResourceKind.TASK, TASK_WEB_1)
    hub.flush()
    assert ("task", "remove", TASK_WEB_1) in seen(drain(alice))


def test_same_grants_share_a_frame_other_grants_do_not(hub: Hub, synced_cache: Cache) -> None:
    first, second = (hub.open(frozenset({ALL}), access=access("alice")) for _ in range(2))
    twin = hub.open(frozenset({ALL}), access=access("alice2"))   # the same grant matches both users
    other = hub.open(frozenset({ALL}), access=access("bob"))
    touch(synced_cache)
    hub.flush()
    frames = [first.take(0), second.take(0), twin.take(0)]
    assert frames[0] and all(frame is frames[0] for frame in frames)
    assert other.take(0) not in (None, frames[0])


def test_open_streams_follow_a_reloaded_policy(synced_cache: Cache) -> None:
    policy: list[Any] = [POLICY]
    hub = Hub(synced_cache, batch_interval=60.0)
    hub.follow_policy(lambda: policy[0])
    alice = hub.open(frozenset({ALL}), access=access("alice"), identity=Identity("alice", "alice", "headers"))
    bob = hub.open(frozenset({ALL}), access=access("bob"), identity=Identity("bob", "bob", "headers"))
    policy[0] = parse_policy({"grants": [{"resources": ["config:*"], "audience": ["user:bob"],
                                          "permissions": ["read"]}]})
    touch(synced_cache)
    hub.flush()
    assert names(drain(alice)) == ["sync"]         # her grant is gone: told to refetch, then nothing
    assert seen(drain(bob)) == {("config", "update", CFG_SHOP), ("config", "update", CFG_OTHER)}
    policy[0] = None                               # no policy: everything
    touch(synced_cache, 80)
    hub.flush()
    assert alice.access is None and ("service", "update", SVC_MONITOR) in seen(drain(alice))


def names(events: list[Any]) -> list[str]:
    return [name for _, name, _ in events]


def test_a_reload_resyncs_at_once_the_streams_whose_grants_changed(synced_cache: Cache) -> None:
    """Revocation and restoration each send ``sync`` when the policy swaps, with no change pending (the
    stream would otherwise stay silent, and the changes made while revoked would never reach it); a reader
    whose grants stay the same gets nothing."""
    policy: list[Any] = [POLICY]
    hub = Hub(synced_cache, batch_interval=60.0)
    hub.follow_policy(lambda: policy[0])
    alice = hub.open(frozenset({ALL}), access=access("alice"), identity=Identity("alice", "alice", "headers"))
    bob = hub.open(frozenset({ALL}), access=access("bob"), identity=Identity("bob", "bob", "headers"))
    revoked = parse_policy({"grants": [{"resources": ["service:monitor"], "audience": ["user:bob"],
                                        "permissions": ["read"]}]})
    policy[0] = revoked
    hub.policy_swapped()
    resync = drain(alice)
    assert names(resync) == ["sync"] and resync[0][0] == synced_cache.history.last_seq
    assert drain(bob) == []                        # same grants: nothing to refetch
    assert alice.access is not None and alice.access.grants == ()
    touch(synced_cache)                            # changes while revoked: none reach her
    hub.flush()
    assert drain(alice) == [] and ("service", "update", SVC_MONITOR) in seen(drain(bob))
    policy[0] = POLICY                             # restored: sync (her client refetches what it missed)
    hub.policy_swapped()
    assert names(drain(alice)) == ["sync"] and drain(bob) == []
    hub.policy_swapped()                           # the same policy again: nothing
    assert drain(alice) == [] and hub.stats.access_resyncs == 2
    touch(synced_cache, 90)
    hub.flush()
    assert ("config", "update", CFG_SHOP) in seen(drain(alice))


def test_a_flush_skips_a_client_whose_grants_changed_while_it_yielded(synced_cache: Cache) -> None:
    """A frame built for the old grants is not offered after the reload's ``sync``."""
    policy: list[Any] = [POLICY]
    hub = Hub(synced_cache, batch_interval=60.0)
    hub.follow_policy(lambda: policy[0])
    alice = hub.open(frozenset({ALL}), access=access("alice"), identity=Identity("alice", "alice", "headers"))
    touch(synced_cache)
    original = hub._readable

    def swap_then_filter(*args: Any) -> Any:   # the reload lands while the flush filters (it may yield there)
        policy[0] = parse_policy({"grants": [{"resources": ["service:monitor"], "audience": ["user:bob"],
                                              "permissions": ["read"]}]})
        hub.policy_swapped()
        return original(*args)

    hub._readable = swap_then_filter  # type: ignore[method-assign]
    hub.flush()
    assert names(drain(alice)) == ["sync"]


def test_unrestricted_access_is_no_access_at_all(hub: Hub) -> None:
    assert hub.open(frozenset({ALL}), access=UNRESTRICTED).access is None
    assert hub.open(frozenset({ALL})).access is None


def test_replay_is_filtered_and_sync_always_passes(hub: Hub, synced_cache: Cache) -> None:
    start = synced_cache.history.last_seq
    touch(synced_cache)
    alice = hub.open(frozenset({ALL}), access=access("alice"))
    replayed = parse(b"".join(hub.replay(alice, str(start))))
    assert ("config", "update", CFG_SHOP) in seen(replayed)
    assert not {i for i in seen(replayed) if i[2] in (SVC_MONITOR, CFG_OTHER)}
    dave = hub.open(frozenset({ALL}), access=access("dave"))
    assert list(hub.replay(dave, str(start))) == []
    for who in (dave, alice):   # an id this service never gave: sync, whoever asks
        assert [name for _, name, _ in parse(b"".join(hub.replay(who, "not-an-id")))] == ["sync"]


def test_an_overflow_sync_reaches_a_restricted_client(synced_cache: Cache) -> None:
    hub = Hub(synced_cache, batch_interval=60.0, queue_frames=1)
    alice = hub.open(frozenset({ALL}), access=access("alice"))
    for version in (90, 91):
        synced_cache.upsert(ResourceKind.CONFIG, config(CFG_SHOP, "shop_nginx", stack="shop", version=version))
        hub.flush()
    assert [name for _, name, _ in drain(alice)] == ["sync"]


def finding(kind: str, resource_id: str, name: str) -> FindingChange:
    return FindingChange(FindingAction.APPEARED, Finding("no-limits", "warning", kind, resource_id, name, "m", "f",
                                                         first_seen=1_700_000_000.0, seq=1))


def test_findings_are_filtered_by_their_key(hub: Hub, synced_cache: Cache) -> None:
    clients = {user: hub.open(frozenset({RECOMMENDATIONS}), access=access(user)) for user in ("alice", "bob", "erin")}
    everyone = hub.open(frozenset({RECOMMENDATIONS}))
    publish(hub, [finding("service", SVC_WEB, "shop_web_api"), finding("service", SVC_MONITOR, "monitor"),
                  finding("node", NODE_WORKER, "worker-1"), finding("cluster", "", "cluster")])
    ids = {user: {d["resource"]["targetName"] for d in items(drain(client))} for user, client in clients.items()}
    assert ids == {"alice": {"shop_web_api"}, "bob": {"monitor"}, "erin": {"worker-1", "cluster"}}
    assert len(items(drain(everyone))) == 4


def test_a_detail_stream_of_an_unreadable_object_is_403_acl001() -> None:
    policy = {"grants": [{"resources": ["stack:shop"], "audience": ["user:alice"], "permissions": ["read"]}]}
    harness = build_harness(FakeEngine(cluster()), auth_mode="headers", headers_subject="X-User",
                            trusted_proxies=("127.0.0.1/32",), acl_policy=json.dumps(policy))
    harness.start()
    try:
        client = harness.app.test_client()
        response = client.get(f"/services/{SVC_MONITOR}", headers={"X-User": "alice", "Accept": "text/event-stream"})
        body = response.get_json()
        assert response.status_code == 403 and body["code"] == "ACL001"
        assert body["resource"] == f"service:{SVC_MONITOR}" and "monitor\"" not in response.get_data(as_text=True)
        stream = client.get("/recommendations", headers={"X-User": "dave", "Accept": "text/event-stream"})
        assert stream.status_code == 403 and stream.get_json()["code"] == "ACL001"   # cluster-wide: no grant
    finally:
        harness.stop()
