"""Field-level differences and one-line summaries of change records (app.history.diff, .summary)."""

from __future__ import annotations

import copy

from app.cache.history import Action
from app.cache.store import Cache
from app.history import diff, entries, summary
from app.query import service_insights
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def _updated(raw: dict, **changes: object) -> dict:
    new = copy.deepcopy(raw)
    new["Version"] = {"Index": raw["Version"]["Index"] + 1}
    for dotted, value in changes.items():
        target = new
        *parents, last = dotted.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return new


def test_replicas_image_and_env_changes_are_fields_from_the_object_root() -> None:
    before = o.service(o.SVC_WEB, "web", replicas=2, image="nginx:1.25")
    before["Spec"]["TaskTemplate"]["ContainerSpec"]["Env"] = ["A=1", "B=2"]
    after = copy.deepcopy(before)
    after["Spec"]["Mode"]["Replicated"]["Replicas"] = 3
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "nginx:1.27@sha256:" + "cd" * 32
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Env"] = ["B=2", "A=5", "C=3"]
    found = diff.differences(K.SERVICE, before, after)
    fields = {service_insights.render_path(path): (old, new) for path, old, new in found}
    assert fields["Spec.Mode.Replicated.Replicas"] == (2, 3)
    assert fields['Spec.TaskTemplate.ContainerSpec.Env["A"]'] == ("1", "5")
    assert fields['Spec.TaskTemplate.ContainerSpec.Env["C"]'][1] == "3"
    assert fields['Spec.TaskTemplate.ContainerSpec.Env["C"]'][0] is service_insights.ABSENT
    assert 'Spec.TaskTemplate.ContainerSpec.Env["B"]' not in fields     # reordering is no change
    text = summary.update_summary(K.SERVICE, found)
    assert text.startswith("replicas 2→3, image nginx:1.25→nginx:1.27, ")
    assert "and 1 more" in text


def test_a_version_bump_alone_has_no_differences() -> None:
    before = o.service(o.SVC_WEB, "web")
    after = _updated(before, UpdatedAt="2030-01-01T00:00:00Z")
    assert diff.differences(K.SERVICE, before, after) == []
    assert summary.update_summary(K.SERVICE, []) == "updated (no tracked field changed)"


def test_task_state_and_desired_state_are_tracked_outside_the_spec() -> None:
    before = o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_WORKER, state="running")
    after = _updated(before, Status__State="failed", DesiredState="shutdown", Status__Err="exit 1")
    found = diff.differences(K.TASK, before, after)
    assert [service_insights.render_path(p) for p, _, _ in found] == \
        ["DesiredState", "Status.Err", "Status.State"]
    assert summary.update_summary(K.TASK, found) == "state running→failed, desired state running→shutdown, " \
        "error set to exit 1"


def test_node_availability_and_labels() -> None:
    before = o.node(o.NODE_WORKER, "worker-1")
    after = _updated(before, Spec__Availability="drain", Spec__Labels={"zone": "b"})
    found = diff.differences(K.NODE, before, after)
    text = summary.update_summary(K.NODE, found)
    assert text == "availability active→drain, label zone a→b"   # the builder labels it zone=a


def test_networks_and_volumes_compare_their_configuration_not_their_attachments() -> None:
    before = o.network(o.NET_SHOP, "shop_default", stack="shop")
    after = copy.deepcopy(before)
    after["Containers"] = {"abc": {"Name": "x"}}
    assert diff.differences(K.NETWORK, before, after) == []
    after["Labels"] = {**(after.get("Labels") or {}), "tier": "db"}
    assert summary.update_summary(K.NETWORK, diff.differences(K.NETWORK, before, after)) == "label tier set to db"


def test_stack_member_lists_are_summarised_as_counts() -> None:
    before = {"name": "shop", "services": ["a"], "configs": [], "secrets": [], "networks": [], "volumes": []}
    after = {**before, "services": ["a", "b"]}
    assert summary.update_summary(K.STACK, diff.differences(K.STACK, before, after)) == "services 1→2"


def test_an_image_digest_change_alone_says_so() -> None:
    before = o.service(o.SVC_WEB, "web")
    after = copy.deepcopy(before)
    after["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "nginx:1.25@sha256:" + "ef" * 32
    assert summary.update_summary(K.SERVICE, diff.differences(K.SERVICE, before, after)) == "image digest changed"


def test_long_values_are_cut_in_the_summary() -> None:
    before = o.service(o.SVC_WEB, "web", labels={"note": "short"})
    after = copy.deepcopy(before)
    after["Spec"]["Labels"]["note"] = "x" * 500
    text = summary.update_summary(K.SERVICE, diff.differences(K.SERVICE, before, after))
    assert text.startswith("label note short→xxx") and text.endswith("…") and len(text) < 80


def test_create_and_remove_summaries() -> None:
    assert summary.create_summary(K.SERVICE, o.service(o.SVC_WEB, "web", replicas=2, image="nginx:1.25")) == \
        "created: image nginx:1.25, replicas 2"
    assert summary.create_summary(K.SERVICE, o.service(o.SVC_MONITOR, "mon", replicas=None)).endswith("global")
    assert summary.remove_summary(K.TASK, o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_WORKER, state="failed")) == \
        "removed (last state failed)"
    assert summary.create_summary(K.CONFIG, {}) == "created"


def test_an_entry_carries_changes_on_updates_only_and_a_null_audit() -> None:
    cache = Cache()
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", replicas=2))
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "web", replicas=4, version=21))
    cache.remove(K.SERVICE, o.SVC_WEB)
    records = [c for c in reversed(list(cache.history.newest_first())) if c.kind is K.SERVICE]
    create, update, remove = (entries.entry(c, cache, "/base") for c in records)
    assert update["@id"] == "/base/history/2" and update["@type"] == "HistoryEntry" and update["id"] == 2
    assert update["action"] == "update" and update["type"] == "service" and update["resourceId"] == o.SVC_WEB
    assert update["resource"] == f"/base/services/{o.SVC_WEB}" and update["summary"] == "replicas 2→4"
    assert update["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 2, "new": 4}]
    assert update["audit"] is None and update["timestamp"].endswith("Z")
    assert "changes" not in create and "changes" not in remove
    assert create["action"] == "create" and remove["summary"] == "removed"


def test_a_task_entry_is_named_after_its_service_and_slot() -> None:
    cache = Cache()
    cache.upsert(K.SERVICE, o.service(o.SVC_WEB, "shop_web"))
    cache.upsert(K.TASK, o.task(o.TASK_WEB_2, o.SVC_WEB, o.NODE_WORKER, slot=2))
    change = next(c for c in cache.history.newest_first() if c.kind is K.TASK and c.action is Action.CREATE)
    assert entries.entry(change, cache, "")["name"] == "shop_web.2"
