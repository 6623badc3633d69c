"""Encoded list items (app.http.encoded_items): a page joined from kept item bytes is the document the
whole-body encoding makes, and an item is made again when its entry or what it shows of others changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cache.store import Cache
from app.http.encoded_items import SLACK, EncodedItems, joined_page
from app.http.respond import encode
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.support import Harness, wait_until

texts = st.text(max_size=12)
values = st.recursive(st.none() | st.booleans() | st.integers(-2**60, 2**60) | texts,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                      max_leaves=8)


@given(head=st.dictionaries(texts.filter(lambda k: k != "items"), values, max_size=4),
       items=st.lists(st.dictionaries(texts, values, max_size=3), max_size=5),
       tail=st.dictionaries(texts.filter(lambda k: k != "items"), values, max_size=3))
def test_a_joined_page_is_the_whole_documents_encoding(head: dict[str, Any], items: list[Any],
                                                      tail: dict[str, Any]) -> None:
    tail = {k: v for k, v in tail.items() if k not in head}
    joined = joined_page(encode(head), [encode(item) for item in items], tail, encode)
    assert joined == encode({**head, "items": items, **tail})


def compact(body: bytes) -> bytes:
    return json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("path", ["/tasks", "/services", "/nodes?sort=name", "/networks?limit=1&offset=1"])
def test_pages_are_compact_json_in_schema_order(shared_client: Any, path: str) -> None:
    body = shared_client.get(path).get_data()
    assert body == compact(body)
    document = json.loads(body)
    assert list(document) == ["@context", "@id", "@type", "items", "total", "limit", "offset"]


def test_a_task_item_follows_its_services_rename(harness: Harness) -> None:
    client = harness.app.test_client()

    def names() -> set[str]:
        return {t["ServiceName"] for t in client.get(f"/services/{o.SVC_WEB}/tasks")
                .get_json()["items"]}
    assert names() == {"shop_web_api"}
    harness.engine.objects[ResourceKind.SERVICE][o.SVC_WEB]["Spec"]["Name"] = "shop_web_api2"
    harness.engine.objects[ResourceKind.SERVICE][o.SVC_WEB]["Version"]["Index"] += 1
    harness.engine.emit("service", "update", o.SVC_WEB)
    wait_until(lambda: harness.cache.get(ResourceKind.SERVICE, o.SVC_WEB).name == "shop_web_api2", 2,
               message="the rename in the cache")
    assert names() == {"shop_web_api2"}


def test_a_changed_entry_is_encoded_again(harness: Harness) -> None:
    client = harness.app.test_client()
    first = {s["ID"]: s for s in client.get("/services").get_json()["items"]}
    harness.engine.objects[ResourceKind.SERVICE][o.SVC_WEB]["Spec"]["Labels"] = {"tier": "gold"}
    harness.engine.objects[ResourceKind.SERVICE][o.SVC_WEB]["Version"]["Index"] += 1
    harness.engine.emit("service", "update", o.SVC_WEB)
    wait_until(lambda: harness.cache.get(ResourceKind.SERVICE, o.SVC_WEB).raw["Spec"].get("Labels")
               == {"tier": "gold"}, 2, message="the update in the cache")
    second = {s["ID"]: s for s in client.get("/services").get_json()["items"]}
    assert second[o.SVC_WEB]["Spec"]["Labels"] == {"tier": "gold"} != first[o.SVC_WEB]["Spec"].get("Labels")
    assert {k: v for k, v in second.items() if k != o.SVC_WEB} == {k: v for k, v in first.items() if k != o.SVC_WEB}


def test_items_of_removed_objects_do_not_pile_up(synced_cache: Cache) -> None:
    items = EncodedItems()
    tasks = synced_cache.entries(ResourceKind.TASK)
    objects = sum(synced_cache.count(kind) for kind in ResourceKind)
    for n in range(2 * objects + SLACK + 10):   # items of tasks since removed (a crash loop makes new ones)
        items._kept[(ResourceKind.TASK, f"gone{n}", 1, "")] = (tasks[0], (), b"{}")
    encoded = items.encoded(synced_cache, ResourceKind.TASK, tasks, 1, "",
                            lambda kind, data, object_id, base: {"@id": object_id, **data}, encode)
    assert len(encoded) == len(tasks) == len(items)
    assert [json.loads(blob)["@id"] for blob in encoded] == [task.id for task in tasks]
