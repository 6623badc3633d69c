"""Entry derivation: ids, names, filter activations, sort keys, timestamps and search per kind."""

from __future__ import annotations

import pytest

from app.cache.entries import build_entry, is_same, labels_of, matches_search, service_mode, stack_of
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def test_node_entry_uses_the_hostname_as_name_and_exposes_its_filter_fields() -> None:
    entry = build_entry(K.NODE, o.node(o.NODE_DOWN, "Worker-2", state="down", availability="drain"))
    assert (entry.id, entry.name) == (o.NODE_DOWN, "Worker-2")
    assert entry.activation == {"id": o.NODE_DOWN, "name": "Worker-2", "state": "down", "role": "worker",
                                "availability": "drain"}
    assert entry.version == 10
    assert entry.updated == o.UPDATED
    assert entry.search_name == "worker-2"
    assert entry.search_segments == ("worker", "2")
    assert set(entry.sort_keys) == set(K.NODE.spec.sort_fields)


def test_service_entry_activation_has_image_mode_and_stack() -> None:
    entry = build_entry(K.SERVICE, o.service(o.SVC_WEB, "shop_web_api", stack="shop", image="nginx:1.25"))
    assert entry.name == "shop_web_api"
    assert entry.activation == {"id": o.SVC_WEB, "name": "shop_web_api",
                                "image": f"nginx:1.25@sha256:{'ab' * 32}", "mode": "replicated",
                                "stack": "shop"}
    unstacked = build_entry(K.SERVICE, o.service(o.SVC_MONITOR, "monitor", replicas=None))
    assert unstacked.activation["stack"] == "" and unstacked.activation["mode"] == "global"


@pytest.mark.parametrize(("mode", "expected"), [
    ({"Replicated": {"Replicas": 3}}, "replicated"),
    ({"Global": {}}, "global"),
    ({"ReplicatedJob": {"MaxConcurrent": 1}}, "replicated-job"),
    ({"GlobalJob": {}}, "global-job"),
    ({}, ""),
])
def test_service_mode_names(mode: dict, expected: str) -> None:  # type: ignore[type-arg]
    assert service_mode({"Spec": {"Mode": mode}}) == expected


def test_task_entry_activation_has_every_filter_field_with_types() -> None:
    entry = build_entry(K.TASK, o.task(o.TASK_DB_OLD, o.SVC_DB, o.NODE_DOWN, slot=1, state="failed",
                                       desired="shutdown", image="postgres:16", exit_code=137,
                                       error="task: non-zero exit (137)"))
    assert entry.activation == {
        "id": o.TASK_DB_OLD, "state": "failed", "desired_state": "shutdown",
        "image": f"postgres:16@sha256:{'ab' * 32}", "exit_code": 137, "error": "task: non-zero exit (137)",
        "service": o.SVC_DB, "node": o.NODE_DOWN, "slot": 1,
    }
    assert set(entry.activation) == set(K.TASK.spec.filter_fields)


def test_task_entry_fills_absent_fields_with_empty_values() -> None:
    raw = o.task(o.TASK_MON_WORKER, o.SVC_MONITOR, "", slot=None, state="pending")
    del raw["Status"]["ContainerStatus"]
    entry = build_entry(K.TASK, raw)
    assert entry.activation["slot"] == 0
    assert entry.activation["exit_code"] == 0
    assert entry.activation["error"] == ""
    assert entry.activation["node"] == ""


@pytest.mark.parametrize("kind", list(ResourceKind))
def test_every_kind_has_every_filter_field_and_sort_key(kind: ResourceKind) -> None:
    raws = o.cluster()
    raw = raws[kind][0] if kind is not K.STACK else {"name": "shop", "services": ["a"], "configs": []}
    entry = build_entry(kind, raw)
    assert set(entry.activation) == set(kind.spec.filter_fields)
    for field, field_type in kind.spec.filter_fields.items():
        expected = int if field_type.value == "int" else str
        assert type(entry.activation[field]) is expected, field
    assert set(entry.sort_keys) == set(kind.spec.sort_fields)


def test_task_state_sort_puts_running_first_then_starting_states_then_the_rest_alphabetically() -> None:
    states = ["shutdown", "failed", "pending", "running", "complete", "new", "rejected", "starting",
              "preparing", "ready", "orphaned", "assigned", "accepted"]
    entries = [build_entry(K.TASK, o.task(f"t{index}", "s", "n", state=state))
               for index, state in enumerate(states)]
    ordered = [e.activation["state"] for e in sorted(entries, key=lambda e: e.sort_keys["state"])]
    assert ordered[0] == "running"
    assert ordered[1:5] == ["new", "preparing", "starting", "ready"]
    assert ordered[5:] == ["accepted", "assigned", "complete", "failed", "orphaned", "pending", "rejected",
                           "shutdown"]


def test_name_sort_keys_are_case_insensitive() -> None:
    names = ["beta", "Alpha", "gamma", "Beta"]
    entries = [build_entry(K.CONFIG, o.config(f"c{index}", name)) for index, name in enumerate(names)]
    ordered = [e.name for e in sorted(entries, key=lambda e: e.sort_keys["name"])]
    assert [name.lower() for name in ordered] == ["alpha", "beta", "beta", "gamma"]


def test_node_status_sorts_by_state_and_task_service_and_node_by_id() -> None:
    node = build_entry(K.NODE, o.node("n", "h", state="down"))
    assert node.sort_keys["status"] == ("down",)
    task = build_entry(K.TASK, o.task("t", "svc-id", "node-id"))
    assert task.sort_keys["service"] == ("svc-id",)
    assert task.sort_keys["node"] == ("node-id",)


def test_config_and_secret_sort_by_timestamps_and_report_updated_at() -> None:
    entry = build_entry(K.SECRET, o.secret("s", "pw", updated="2025-01-01T00:00:00Z"))
    assert entry.sort_keys["created"] == (o.CREATED,)
    assert entry.sort_keys["updated"] == ("2025-01-01T00:00:00Z",)
    assert entry.updated == "2025-01-01T00:00:00Z"


def test_network_entry_uses_id_and_created() -> None:
    entry = build_entry(K.NETWORK, o.network(o.NET_BRIDGE, "bridge", driver="bridge", scope="local",
                                             created="2024-06-01T00:00:00Z"))
    assert (entry.id, entry.name, entry.updated, entry.version) == (
        o.NET_BRIDGE, "bridge", "2024-06-01T00:00:00Z", None)
    assert entry.activation == {"id": o.NET_BRIDGE, "name": "bridge", "driver": "bridge", "scope": "local"}


def test_volume_entry_is_addressed_by_name() -> None:
    entry = build_entry(K.VOLUME, o.volume("shop_data", driver="nfs", created="2024-06-01T00:00:00Z"))
    assert (entry.id, entry.name, entry.updated) == ("shop_data", "shop_data", "2024-06-01T00:00:00Z")
    assert entry.activation == {"name": "shop_data", "driver": "nfs", "scope": "local"}


def test_stack_entry_counts_its_members() -> None:
    entry = build_entry(K.STACK, {"name": "shop", "services": ["a", "b"], "configs": ["c"], "secrets": [],
                                  "networks": ["n"], "volumes": []})
    assert entry.id == "shop"
    assert entry.activation == {"name": "shop", "services": 2, "configs": 1, "secrets": 0, "networks": 1,
                                "volumes": 0}
    assert entry.updated == ""


def test_secret_entry_is_built_without_data() -> None:
    entry = build_entry(K.SECRET, o.secret(o.SEC_SHOP, "pw"))
    assert "Data" not in entry.raw["Spec"]


def test_labels_and_stack_come_from_spec_labels_or_top_level_labels() -> None:
    service = build_entry(K.SERVICE, o.service("s", "shop_x", stack="shop"))
    network = build_entry(K.NETWORK, o.network("n", "shop_default", stack="shop"))
    plain = build_entry(K.VOLUME, o.volume("v"))
    assert stack_of(service) == "shop" and stack_of(network) == "shop" and stack_of(plain) == ""
    assert labels_of(network) == {o.STACK_LABEL: "shop"}


def test_is_same_compares_version_index_when_present() -> None:
    old = build_entry(K.NODE, o.node("n", "a", version=3))
    assert is_same(old, build_entry(K.NODE, o.node("n", "a", version=3)))
    assert not is_same(old, build_entry(K.NODE, o.node("n", "a", version=4)))
    assert not is_same(build_entry(K.VOLUME, o.volume("v")), build_entry(K.VOLUME, o.volume("v", driver="x")))


# --------------------------------------------------------------------------- search
def _service(name: str):  # type: ignore[no-untyped-def]
    return build_entry(K.SERVICE, o.service("s", name))


@pytest.mark.parametrize(("name", "query"), [
    ("shop_web_api", "web"),        # substring
    ("shop_web_api", "b_a"),        # substring across a separator
    ("shop_web_api", "wa"),         # first letters of consecutive segments
    ("web_api", "wa"),
    ("shop_web_api", "swa"),
    ("shop_web_api", "wapi"),       # a prefix of one segment, then of the next
    ("shop_web_api", "webapi"),
    ("my-cool-service", "mcs"),     # dashes split segments too
    ("Shop_Web_API", "wa"),         # names are compared lower-cased
])
def test_search_matches_substrings_and_segment_prefixes(name: str, query: str) -> None:
    assert matches_search(_service(name), query)


@pytest.mark.parametrize(("name", "query"), [
    ("shop_web_api", "ab"),         # not a substring, "a" then "b" are not consecutive prefixes
    ("shop_web_api", "wx"),
    ("shop_web_api", "aw"),         # segments must be in order
    ("shop_web_api", "sa"),         # segments must be consecutive
    ("monitor", "mx"),
])
def test_search_rejects_non_matching_queries(name: str, query: str) -> None:
    assert not matches_search(_service(name), query)


def test_node_search_uses_the_hostname() -> None:
    entry = build_entry(K.NODE, o.node(o.NODE_WORKER, "worker-1"))
    assert matches_search(entry, "worker")
    assert matches_search(entry, "w1")
    assert not matches_search(entry, o.NODE_WORKER[:6])
