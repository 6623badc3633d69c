"""/search: parsing, ranking (exact > prefix > substring > segment), grouping with full counts, per-kind
limits, tasks through their service's name, the corpus following cache changes, and the HTTP answer."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from app.cache.store import Cache
from app.errors import ProblemError
from app.query.search import Rank, SearchIndex, SearchQuery, parse_search_query
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind


def search(cache: Cache, text: str, limit: int = 3) -> dict[str, Any]:
    results = SearchIndex(cache).search(SearchQuery(text.lower(), limit, text))
    return {r.kind.spec.plural: (r.count, [(hit.entry.name, hit.rank) for hit in r.hits]) for r in results}


@pytest.fixture
def ranked() -> Cache:
    """Services named to exercise every rank of the query "api"."""
    cache = Cache()
    services = [o.service(o.engine_id(f"svc{n}"), name, image=image, labels=labels)
                for n, (name, image, labels) in enumerate([
                    ("web", "nginx:1.25", {}),
                    ("gateway", "api:2", {}),                       # exact other field (image "api:2"? no)
                    ("backend", "nginx:1.25", {"role": "api"}),     # exact label value
                    ("api", "nginx:1.25", {}),                      # exact name
                    ("api_server", "nginx:1.25", {}),               # name prefix
                    ("web_api", "nginx:1.25", {}),                  # substring of the name
                    ("cache", "apis/cache:1", {}),                  # prefix of the image
                    ("alpha_pi_index", "nginx:1.25", {}),           # segments a|pi|i
                ])]
    cache.replace_all({K.SERVICE: services})
    return cache


def test_ranks_are_exact_then_prefix_then_substring_then_segment(ranked: Cache) -> None:
    count, hits = search(ranked, "api", limit=100)["services"]
    assert hits == [("api", Rank.EXACT_NAME), ("backend", Rank.EXACT), ("api_server", Rank.PREFIX_NAME),
                    ("cache", Rank.PREFIX), ("gateway", Rank.PREFIX), ("web_api", Rank.SUBSTRING),
                    ("alpha_pi_index", Rank.SEGMENT)]
    assert count == 7


def test_the_count_is_every_match_while_results_are_cut_to_the_limit(ranked: Cache) -> None:
    count, hits = search(ranked, "api", limit=2)["services"]
    assert count == 7
    assert hits == [("api", Rank.EXACT_NAME), ("backend", Rank.EXACT)]


def test_the_search_is_case_insensitive(ranked: Cache) -> None:
    assert search(ranked, "API", limit=1)["services"][1] == [("api", Rank.EXACT_NAME)]


def test_within_a_rank_results_are_in_name_order() -> None:
    cache = Cache()
    cache.replace_all({K.SERVICE: [o.service(o.engine_id(f"s{i}"), name)
                                   for i, name in enumerate(["web_c", "web_a", "web_b"])]})
    assert [name for name, _ in search(cache, "web")["services"][1]] == ["web_a", "web_b", "web_c"]


def test_kinds_group_in_the_reference_order_and_only_with_matches(synced_cache: Cache) -> None:
    found = search(synced_cache, "shop")
    assert list(found) == ["services", "stacks", "tasks", "configs", "secrets", "networks", "volumes"]
    assert found["stacks"] == (1, [("shop", Rank.EXACT_NAME)])
    assert search(synced_cache, "no-such-thing-anywhere") == {}


def test_ids_match_by_prefix(synced_cache: Cache) -> None:
    found = search(synced_cache, o.SVC_MONITOR[:8])
    assert found["services"] == (1, [("monitor", Rank.PREFIX)])


def test_images_without_digest_and_node_addresses_and_labels_match(synced_cache: Cache) -> None:
    assert search(synced_cache, "postgres:16")["services"] == (1, [("shop_db", Rank.EXACT)])
    assert search(synced_cache, "zone=a")["nodes"][0] == 3                    # label key=value
    node = synced_cache.get(K.NODE, o.NODE_WORKER)
    assert node is not None
    address = node.raw["Status"]["Addr"]
    assert search(synced_cache, address)["nodes"] == (1, [("worker-1", Rank.EXACT)])
    assert "sha256" not in synced_cache.get(K.SERVICE, o.SVC_DB).search_text  # type: ignore[union-attr]
    assert "tasks" not in search(synced_cache, "sha256")


def test_tasks_match_through_their_service_name_at_that_rank(synced_cache: Cache) -> None:
    count, hits = search(synced_cache, "monitor", limit=10)["tasks"]
    assert count == 3
    assert {rank for _, rank in hits} == {Rank.EXACT_NAME}
    count, _ = search(synced_cache, "shop_db")["tasks"]
    assert count == 2


def test_a_task_matching_by_own_field_and_by_service_counts_once(synced_cache: Cache) -> None:
    # "postgres" is both shop_db's tasks' image and nothing else: two tasks, not four.
    assert search(synced_cache, "postgres")["tasks"][0] == 2
    # The service name "shop_db" contains "db"; the tasks' ids contain "db" too.
    assert search(synced_cache, "db", limit=10)["tasks"][0] == 2


def test_segment_prefixes_find_names_the_substring_misses(synced_cache: Cache) -> None:
    count, hits = search(synced_cache, "swa")["services"]   # shop_web_api: s|w|a
    assert (count, hits) == (1, [("shop_web_api", Rank.SEGMENT)])
    assert "tasks" in search(synced_cache, "swa")             # its tasks through the name


def test_the_corpus_follows_cache_changes(synced_cache: Cache) -> None:
    index = SearchIndex(synced_cache)
    query = SearchQuery("billing", 3)
    assert index.search(query) == []
    synced_cache.upsert(K.SERVICE, o.service(o.engine_id("svcbilling"), "billing"))
    assert [r.kind for r in index.search(query)] == [K.SERVICE]
    synced_cache.remove(K.SERVICE, o.engine_id("svcbilling"))
    assert index.search(query) == []


@pytest.mark.parametrize(("args", "limit"), [
    ({}, 3), ({"limit": "5"}, 5), ({"limit": "0"}, 1000), ({"limit": "5000"}, 1000),
    ({"limit": "-2"}, 3), ({"limit": "x"}, 3), ({"limit": "9" * 40}, 1000),
])
def test_limit_follows_the_reference(args: dict[str, str], limit: int) -> None:
    assert parse_search_query({"q": "web", **args}).limit == limit


@pytest.mark.parametrize(("q", "code"), [(None, "SEA001"), ("", "SEA001"), ("   ", "SEA001"), ("\x00\x1f", "SEA001"),
                                         ("x" * 201, "SEA002")])
def test_bad_queries_are_problems(q: str | None, code: str) -> None:
    with pytest.raises(ProblemError) as raised:
        parse_search_query({} if q is None else {"q": q})
    assert raised.value.code == code


def test_a_query_is_trimmed_and_stripped_of_control_characters() -> None:
    query = parse_search_query({"q": "  We\x1fb \n"})
    assert (query.text, query.original) == ("web", "Web")


# --------------------------------------------------------------------------- HTTP
def test_the_search_answer_is_the_reference_shape(shared_client: FlaskClient) -> None:
    response = shared_client.get("/search?q=shop_web&limit=1")
    assert response.status_code == 200
    body = response.get_json()
    assert (body["@id"], body["@type"], body["query"], body["limit"]) == ("/search", "SearchResult", "shop_web", 1)
    assert body["counts"] == {"services": 1, "tasks": 2}
    assert body["total"] == 3
    assert body["results"]["services"] == [{
        "@id": f"/services/{o.SVC_WEB}", "id": o.SVC_WEB, "name": "shop_web_api", "detail": "nginx:1.25",
        "state": "running", "match": "prefix"}]
    task = body["results"]["tasks"][0]
    assert task["name"] in ("shop_web_api.1", "shop_web_api.2") and task["state"] == "running"


def test_search_details_per_kind(shared_client: FlaskClient) -> None:
    results = shared_client.get("/search?q=shop&limit=10").get_json()["results"]
    assert results["stacks"][0]["detail"] == "2 services"
    assert results["volumes"][0] == {"@id": "/volumes/shop_data", "id": "shop_data", "name": "shop_data",
                                     "detail": "local", "match": "exact"}
    assert results["configs"][0]["detail"] == o.CREATED
    node = shared_client.get("/search?q=manager-1").get_json()["results"]["nodes"][0]
    assert node["detail"] == "manager, ready"


@pytest.mark.parametrize(("query", "code"), [("", "SEA001"), ("?q=", "SEA001"), ("?q=" + "a" * 201, "SEA002")])
def test_bad_search_requests_are_problems(shared_client: FlaskClient, query: str, code: str) -> None:
    response = shared_client.get("/search" + query)
    assert response.status_code == 400
    assert response.content_type == "application/problem+json"
    assert response.get_json()["code"] == code


def test_search_before_the_first_sync_is_503(unsynced: Any) -> None:
    response = unsynced.app.test_client().get("/search?q=web")
    assert response.status_code == 503 and response.get_json()["code"] == "ENG001"


def test_the_search_feed_is_the_history_of_matching_names(shared_client: FlaskClient) -> None:
    import feedparser

    response = shared_client.get("/search.atom?q=shop_db")
    assert response.status_code == 200
    parsed = feedparser.parse(response.get_data())
    assert not parsed.bozo and parsed.entries
    assert all("shop_db" in entry.title for entry in parsed.entries)


def test_the_longest_query_is_answered(shared_client: FlaskClient) -> None:
    for q in ("ab" * 100, "\u4e00" * 200, "a-" * 100):
        response = shared_client.get("/search", query_string={"q": q})
        assert response.status_code == 200 and response.get_json()["total"] == 0
