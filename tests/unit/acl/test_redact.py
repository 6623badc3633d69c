"""Embedded references (``app.acl.redact``): a readable service's or task's engine object names no config,
secret, volume or network its reader may not read; copy-on-write, memoised per (grants, object).

The reader below holds ``service:shop_web_api`` only: the service and its tasks are readable, while the
stack's config ``shop_nginx``, secret ``shop_db_password``, network ``shop_default`` and volume
``shop_data`` are not (they are reachable through ``stack:shop`` or their own names only)."""

from __future__ import annotations

import copy
import json
from functools import partial
from typing import Any

import pytest

from app.acl import redact as redaction
from app.acl.evaluator import access_for
from app.acl.policy import parse_policy
from app.auth.identity import Identity
from app.cache.history import Action, Change
from app.cache.store import Cache
from app.history import entries
from app.http.acl_read import ReadFilter
from app.query import representations
from app.resources import ResourceKind
from tests.unit import objects as o

HIDDEN_NAMES = ("shop_nginx", "shop_db_password", "shop_default", "shop_data")
BOB = Identity("bob", "Bob", "headers")


def reader(cache: Cache, *resources: str) -> ReadFilter:
    policy = parse_policy({"grants": [{"resources": list(resources), "audience": ["user:bob"],
                                       "permissions": ["read"]}]})
    return ReadFilter(access_for(BOB, policy, auth_enabled=True), cache)


def attached_task(cache: Cache) -> dict[str, Any]:
    """A task of shop_web_api as the engine shows it: its spec copies the service's, and it embeds the
    whole network it is attached to."""
    raw = o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER, version=31)
    service = cache.get(ResourceKind.SERVICE, o.SVC_WEB)
    assert service is not None
    raw["Spec"] = copy.deepcopy(service.raw["Spec"]["TaskTemplate"])
    raw["NetworksAttachments"] = [{
        "Network": {"ID": o.NET_SHOP, "Version": {"Index": 7},
                    "Spec": {"Name": "shop_default", "Labels": {o.STACK_LABEL: "shop"},
                             "DriverConfiguration": {"Name": "overlay"}},
                    "IPAMOptions": {"Configs": [{"Subnet": "10.0.1.0/24"}]}},
        "Addresses": ["10.0.1.5/24"]}]
    return raw


@pytest.fixture
def cache() -> Cache:
    snapshot = o.cluster()
    store = Cache()
    store.replace_all(snapshot)
    store.upsert(ResourceKind.TASK, attached_task(store))
    return store


def container(raw: dict[str, Any], *path: str) -> dict[str, Any]:
    value: Any = raw
    for key in path:
        value = value[key]
    assert isinstance(value, dict)
    return value


def service_entry(cache: Cache) -> Any:
    entry = cache.get(ResourceKind.SERVICE, o.SVC_WEB)
    assert entry is not None
    return entry


def task_entry(cache: Cache) -> Any:
    entry = cache.get(ResourceKind.TASK, o.TASK_WEB_1)
    assert entry is not None
    return entry


def text_of(value: Any) -> str:
    return json.dumps(value)


# ---------------------------------------------------------------------------------------------- fields
def test_config_name_becomes_null_and_its_id_stays(cache: Cache) -> None:
    out = redaction.redact(service_entry(cache), cache, reader(cache, "service:shop_web_api"))
    (ref,) = container(out, "Spec", "TaskTemplate", "ContainerSpec")["Configs"]
    assert ref["ConfigName"] is None and ref["ConfigID"] == o.CFG_SHOP
    assert ref["File"]["Name"] is None          # "/etc/shop_nginx" spells the hidden name
    assert ref["File"]["Mode"] == 292


def test_secret_name_and_its_default_target_become_null(cache: Cache) -> None:
    out = redaction.redact(service_entry(cache), cache, reader(cache, "service:shop_web_api"))
    (ref,) = container(out, "Spec", "TaskTemplate", "ContainerSpec")["Secrets"]
    assert ref["SecretName"] is None and ref["SecretID"] == o.SEC_SHOP and ref["File"]["Name"] is None


def test_volume_mount_source_and_labels_are_dropped_bind_mounts_stay(cache: Cache) -> None:
    out = redaction.redact(service_entry(cache), cache, reader(cache, "service:shop_web_api"))
    volume, bind = container(out, "Spec", "TaskTemplate", "ContainerSpec")["Mounts"]
    assert volume["Type"] == "volume" and volume["Source"] is None and volume["Target"] is None
    assert "Labels" not in volume["VolumeOptions"]
    assert bind == {"Type": "bind", "Source": "/var/run", "Target": "/host/run"}


def test_network_targets_are_ids_and_stay(cache: Cache) -> None:
    out = redaction.redact(service_entry(cache), cache, reader(cache, "service:shop_web_api"))
    assert out["Spec"]["TaskTemplate"]["Networks"] == [{"Target": o.NET_SHOP, "Aliases": ["api"]}]
    assert out["Endpoint"]["VirtualIPs"][0]["NetworkID"] == o.NET_SHOP


def test_network_target_given_by_name_becomes_the_id(cache: Cache) -> None:
    raw = copy.deepcopy(service_entry(cache).raw)
    raw["Spec"]["TaskTemplate"]["Networks"] = [{"Target": "shop_default"}]
    raw["Spec"]["Networks"] = [{"Target": "shop_default"}]
    out, hidden = redaction.redact_raw(ResourceKind.SERVICE, raw, cache, reader(cache, "service:shop_web_api"))
    assert out["Spec"]["TaskTemplate"]["Networks"] == [{"Target": o.NET_SHOP}]
    assert out["Spec"]["Networks"] == [{"Target": o.NET_SHOP}]
    assert ("network", o.NET_SHOP) in hidden


def test_previous_spec_is_redacted_too(cache: Cache) -> None:
    raw = copy.deepcopy(service_entry(cache).raw)
    raw["PreviousSpec"] = copy.deepcopy(raw["Spec"])
    out, _ = redaction.redact_raw(ResourceKind.SERVICE, raw, cache, reader(cache, "service:shop_web_api"))
    for name in HIDDEN_NAMES:
        assert name not in text_of(out["PreviousSpec"]), name


def test_task_keeps_only_the_id_of_an_unreadable_attached_network(cache: Cache) -> None:
    out = redaction.redact(task_entry(cache), cache, reader(cache, "service:shop_web_api"))
    (attachment,) = out["NetworksAttachments"]
    assert attachment == {"Network": {"ID": o.NET_SHOP}, "Addresses": ["10.0.1.5/24"]}
    spec = out["Spec"]["ContainerSpec"]
    assert spec["Configs"][0]["ConfigName"] is None and spec["Secrets"][0]["SecretName"] is None
    assert spec["Mounts"][0]["Source"] is None
    assert out["Spec"]["Networks"] == [{"Target": o.NET_SHOP, "Aliases": ["api"]}]
    for name in HIDDEN_NAMES:
        assert f'"{name}"' not in text_of(out), name


def test_uncached_volume_is_judged_by_name_and_stack_label(cache: Cache) -> None:
    raw = copy.deepcopy(service_entry(cache).raw)
    mount = raw["Spec"]["TaskTemplate"]["ContainerSpec"]["Mounts"][0]
    mount["Source"] = "shop_local"      # node-local, not cached; labelled with stack shop
    hidden_out, _ = redaction.redact_raw(ResourceKind.SERVICE, raw, cache, reader(cache, "service:shop_web_api"))
    assert hidden_out["Spec"]["TaskTemplate"]["ContainerSpec"]["Mounts"][0]["Source"] is None
    seen_out, _ = redaction.redact_raw(ResourceKind.SERVICE, raw, cache,
                                       reader(cache, "service:shop_web_api", "stack:shop"))
    assert seen_out["Spec"]["TaskTemplate"]["ContainerSpec"]["Mounts"][0]["Source"] == "shop_local"


def test_unknown_ids_are_left_as_they_are(cache: Cache) -> None:
    raw = copy.deepcopy(service_entry(cache).raw)
    container_spec = raw["Spec"]["TaskTemplate"]["ContainerSpec"]
    container_spec["Configs"][0].update(ConfigID="nosuchconfig", ConfigName="ghost")
    container_spec["Secrets"] = []
    container_spec["Mounts"] = []
    raw["Spec"]["TaskTemplate"]["Networks"] = [{"Target": "nosuchnetwork"}]
    out, hidden = redaction.redact_raw(ResourceKind.SERVICE, raw, cache, reader(cache, "service:shop_web_api"))
    assert out is raw and not hidden


# ---------------------------------------------------------------------------------------------- copy-on-write
def test_readable_references_keep_the_very_same_object(cache: Cache) -> None:
    entry = service_entry(cache)
    assert redaction.redact(entry, cache, reader(cache, "stack:shop")) is entry.raw
    assert redaction.redact(task_entry(cache), cache, reader(cache, "stack:shop")) is task_entry(cache).raw


def test_cache_objects_are_never_mutated_and_untouched_parts_are_shared(cache: Cache) -> None:
    entry = service_entry(cache)
    before = copy.deepcopy(entry.raw)
    out = redaction.redact(entry, cache, reader(cache, "service:shop_web_api"))
    assert entry.raw == before and out is not entry.raw
    assert out["Spec"]["Labels"] is entry.raw["Spec"]["Labels"]
    assert out["Spec"]["TaskTemplate"]["Resources"] is entry.raw["Spec"]["TaskTemplate"]["Resources"]


def test_other_kinds_pass_through(cache: Cache) -> None:
    config = cache.get(ResourceKind.CONFIG, o.CFG_OTHER)
    assert config is not None
    assert redaction.redact(config, cache, reader(cache, "config:app_settings")) is config.raw


def test_memoised_per_grants_until_the_cache_changes(cache: Cache) -> None:
    entry, grants = service_entry(cache), ("service:shop_web_api", "stack:shared")
    memo = redaction.memo_for(cache)
    first = redaction.redact(entry, cache, reader(cache, *grants))
    hits = memo.hits
    assert redaction.redact(entry, cache, reader(cache, *grants)) is first
    assert memo.hits == hits + 1
    assert redaction.redact(task_entry(cache), cache, reader(cache, *grants))["NetworksAttachments"][0] \
        == {"Network": {"ID": o.NET_SHOP}, "Addresses": ["10.0.1.5/24"]}
    # the network moves to a stack the same grants reach: the change clears the memo
    cache.upsert(ResourceKind.NETWORK, o.network(o.NET_SHOP, "shop_default", stack="shared"))
    again = redaction.redact(task_entry(cache), cache, reader(cache, *grants))
    assert again["NetworksAttachments"][0]["Network"]["Spec"]["Name"] == "shop_default"


# ---------------------------------------------------------------------------------------------- callers
def test_list_items_and_details_are_redacted_only_for_restricted_readers(cache: Cache) -> None:
    entry = service_entry(cache)
    visible = reader(cache, "service:shop_web_api")
    for name in HIDDEN_NAMES:
        assert name not in text_of(representations.item(cache, entry, visible)), name
        assert name not in text_of(representations.detail(cache, entry, "", visible)), name
        assert name not in text_of(representations.item(cache, task_entry(cache), visible)), name
    assert representations.item(cache, entry)["Spec"] is entry.raw["Spec"]      # unrestricted: no copy


def test_history_changes_of_hidden_references_are_redacted(cache: Cache) -> None:
    before = service_entry(cache).raw
    after = copy.deepcopy(before)
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Configs"] = []
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "nginx:1.27"
    change = Change(999_001, ResourceKind.SERVICE, Action.UPDATE, o.SVC_WEB, "shop_web_api", 1.0, before, after)
    restricted = entries.entry(change, cache, "", visible=reader(cache, "service:shop_web_api"))
    assert "shop_nginx" not in text_of(restricted["changes"]) + restricted["summary"]
    assert any(c["field"].endswith("Configs") for c in restricted["changes"])
    everything = entries.entry(change, cache, "")
    assert "shop_nginx" in text_of(everything["changes"])


def test_stream_events_carry_a_variant_without_hidden_references(cache: Cache) -> None:
    from app.streams import acl as stream_acl
    from app.streams import events
    from app.streams.hub import _variant_visible

    access = access_for(BOB, parse_policy({"grants": [{"resources": ["service:shop_web_api"],
                                                        "audience": ["user:bob"], "permissions": ["read"]}]}),
                        auth_enabled=True)
    entry = service_entry(cache)
    change = Change(999_002, ResourceKind.SERVICE, Action.UPDATE, o.SVC_WEB, "shop_web_api", 1.0, entry.raw, entry.raw)
    item = events.built(cache, change)
    variant = stream_acl.hidden_references(access, cache, item)
    assert variant is not None and variant[:2] == (True, True)
    assert {("config", o.CFG_SHOP), ("secret", o.SEC_SHOP), ("volume", o.VOL_SHOP)} <= variant[2]
    data = events.event_data(cache, change, item.entry, "", partial(_variant_visible, variant))
    for name in HIDDEN_NAMES:
        assert name not in text_of(data), name
    everyone = access_for(BOB, parse_policy({"grants": [{"resources": ["*"], "audience": ["user:bob"],
                                                         "permissions": ["read"]}]}), auth_enabled=True)
    assert stream_acl.hidden_references(everyone, cache, item) is None     # shared data, no variant
