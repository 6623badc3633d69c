"""List parameters (docs/read-api.md): limit/offset leniency, the Range form, sort, dir and search."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from app.cache.store import Cache
from app.query import listing
from app.query.paging import (
    DEFAULT_LIMIT,
    HUGE,
    MAX_LIMIT,
    PageRequest,
    RangeNotSatisfiable,
    content_range,
    parse_page,
    parse_range,
)
from app.resources import ResourceKind
from tests.unit import objects as o

K = ResourceKind
TASK_COUNT = 7


# --------------------------------------------------------------------------- parse_page
def test_limit_and_offset_default_to_50_and_0() -> None:
    assert parse_page({}, None) == PageRequest(DEFAULT_LIMIT, 0)
    assert DEFAULT_LIMIT == 50 and MAX_LIMIT == 200


@pytest.mark.parametrize("limit", ["abc", "", "0", "-1", "1.5", "ten", " "])
def test_invalid_limit_is_ignored(limit: str) -> None:
    assert parse_page({"limit": limit}, None).limit == DEFAULT_LIMIT


@pytest.mark.parametrize(("limit", "expected"), [("1", 1), ("50", 50), ("199", 199), ("200", 200),
                                                 ("201", 200), ("100000", 200), ("007", 7)])
def test_valid_limit_is_used_and_clamped_to_200(limit: str, expected: int) -> None:
    assert parse_page({"limit": limit}, None).limit == expected


@pytest.mark.parametrize("offset", ["abc", "-1", "-100", "2.0", ""])
def test_invalid_offset_is_ignored(offset: str) -> None:
    assert parse_page({"offset": offset}, None).offset == 0


def test_valid_offset_is_used_without_an_upper_bound() -> None:
    assert parse_page({"offset": "3"}, None) == PageRequest(DEFAULT_LIMIT, 3)
    assert parse_page({"offset": "999999"}, None).offset == 999999


def test_range_is_used_when_no_limit_or_offset_is_given() -> None:
    assert parse_page({}, "items 2-5") == PageRequest(4, 2, (2, 5))
    assert parse_page({}, "items=0-0") == PageRequest(1, 0, (0, 0))


@pytest.mark.parametrize("args", [{"limit": "abc"}, {"offset": "-1"}, {"limit": "0", "offset": "x"}])
def test_range_is_used_when_limit_and_offset_are_invalid(args: dict[str, str]) -> None:
    assert parse_page(args, "items 1-2") == PageRequest(2, 1, (1, 2))


@pytest.mark.parametrize("args", [{"limit": "10"}, {"offset": "0"}, {"limit": "5", "offset": "1"}])
def test_valid_query_parameters_win_over_range(args: dict[str, str]) -> None:
    page = parse_page(args, "items 1-2")
    assert page.range_requested is None
    assert page == PageRequest(int(args.get("limit", DEFAULT_LIMIT)), int(args.get("offset", 0)))


def test_range_length_is_clamped_to_200() -> None:
    assert parse_page({}, "items 0-999").limit == MAX_LIMIT


@pytest.mark.parametrize("header", ["bytes=0-4", "items", "items 5-2", "items a-b", "items -3", "items 3-",
                                    "pages 0-1", "", "items 0-1 junk"])
def test_malformed_range_is_ignored(header: str) -> None:
    assert parse_page({}, header) == PageRequest(DEFAULT_LIMIT, 0)
    assert parse_range(header) is None


@pytest.mark.parametrize("header", ["items 0-1,3-4", "items 0-1, 5-6"])
def test_multi_range_is_unsatisfiable(header: str) -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_page({}, header)


def test_content_range_names_first_last_and_total() -> None:
    assert content_range(2, 3, 10) == "items 2-4/10"


# --------------------------------------------------------------------------- the pipeline
def run(cache: Cache, kind: ResourceKind, args: dict[str, str],
        range_header: str | None = None) -> listing.Page:
    return listing.run(cache, kind, listing.parse_list_query(kind, args, range_header))


def names(page: listing.Page) -> list[str]:
    return [entry.name for entry in page.items]


def test_offset_at_or_beyond_total_gives_an_empty_page(synced_cache: Cache) -> None:
    page = run(synced_cache, K.SERVICE, {"offset": "3"})
    assert (page.items, page.total, page.offset, page.partial_range) == ([], 3, 3, False)
    assert run(synced_cache, K.SERVICE, {"offset": "50"}).items == []


def test_range_start_beyond_total_is_unsatisfiable_with_the_total(synced_cache: Cache) -> None:
    with pytest.raises(RangeNotSatisfiable) as raised:
        run(synced_cache, K.SERVICE, {}, "items 3-5")
    assert raised.value.total == 3


def test_range_covering_the_whole_collection_is_not_partial(synced_cache: Cache) -> None:
    assert not run(synced_cache, K.SERVICE, {}, "items 0-2").partial_range
    assert not run(synced_cache, K.SERVICE, {}, "items 0-99").partial_range
    assert run(synced_cache, K.SERVICE, {}, "items 0-1").partial_range
    assert run(synced_cache, K.SERVICE, {}, "items 1-2").partial_range


def test_unknown_sort_field_keeps_the_original_order(synced_cache: Cache) -> None:
    original = names(run(synced_cache, K.SERVICE, {}))
    assert original == ["shop_web_api", "shop_db", "monitor"]  # engine listing order
    assert names(run(synced_cache, K.SERVICE, {"sort": "bogus"})) == original
    assert names(run(synced_cache, K.SERVICE, {"sort": "bogus", "dir": "desc"})) == original
    assert names(run(synced_cache, K.SERVICE, {"sort": "created"})) == original  # not a service sort field


def test_sort_and_dir(synced_cache: Cache) -> None:
    assert names(run(synced_cache, K.SERVICE, {"sort": "name"})) == ["monitor", "shop_db", "shop_web_api"]
    assert names(run(synced_cache, K.SERVICE, {"sort": "name", "dir": "desc"})) == [
        "shop_web_api", "shop_db", "monitor"]
    assert names(run(synced_cache, K.SERVICE, {"sort": "name", "dir": "DESC"}))[0] == "shop_web_api"


@pytest.mark.parametrize("direction", ["asc", "up", "descending", "", "1"])
def test_anything_but_desc_sorts_ascending(synced_cache: Cache, direction: str) -> None:
    assert names(run(synced_cache, K.SERVICE, {"sort": "name", "dir": direction})) == [
        "monitor", "shop_db", "shop_web_api"]


def test_sort_is_case_insensitive(synced_cache: Cache) -> None:
    synced_cache.upsert(K.CONFIG, o.config("c3", "Zeta"))
    synced_cache.upsert(K.CONFIG, o.config("c4", "Beta"))
    expected = ["app_settings", "Beta", "shop_nginx", "Zeta"]
    assert names(run(synced_cache, K.CONFIG, {"sort": "name"})) == expected


def test_task_state_sort_puts_running_tasks_first(synced_cache: Cache) -> None:
    states = [e.activation["state"] for e in run(synced_cache, K.TASK, {"sort": "state"}).items]
    assert states == ["running"] * 4 + ["failed", "pending", "shutdown"]


def test_node_status_sort_orders_by_state(synced_cache: Cache) -> None:
    assert names(run(synced_cache, K.NODE, {"sort": "status"}))[0] == "worker-2"  # down < ready
    assert names(run(synced_cache, K.NODE, {"sort": "hostname", "dir": "desc"})) == [
        "worker-2", "worker-1", "manager-1"]


def test_search_is_a_case_insensitive_substring_or_segment_prefix(synced_cache: Cache) -> None:
    assert names(run(synced_cache, K.SERVICE, {"search": "SHOP"})) == ["shop_web_api", "shop_db"]
    assert names(run(synced_cache, K.SERVICE, {"search": "wa"})) == ["shop_web_api"]
    assert names(run(synced_cache, K.NODE, {"search": "work"})) == ["worker-1", "worker-2"]
    assert names(run(synced_cache, K.SERVICE, {"search": "  "})) == ["shop_web_api", "shop_db", "monitor"]


def test_total_counts_the_searched_items_not_the_page(synced_cache: Cache) -> None:
    page = run(synced_cache, K.SERVICE, {"search": "shop", "limit": "1"})
    assert (names(page), page.total, page.limit) == (["shop_web_api"], 2, 1)


def test_search_is_ignored_for_tasks(synced_cache: Cache) -> None:
    assert run(synced_cache, K.TASK, {"search": "zzz-nothing"}).total == TASK_COUNT


def test_page_is_taken_after_sorting(synced_cache: Cache) -> None:
    page = run(synced_cache, K.SERVICE, {"sort": "name", "limit": "1", "offset": "1"})
    assert names(page) == ["shop_db"]


# --------------------------------------------------------------------------- over HTTP
def test_limit_is_clamped_in_the_response(client: FlaskClient) -> None:
    body = client.get("/tasks?limit=500").get_json()
    assert (body["limit"], body["total"], len(body["items"])) == (200, TASK_COUNT, TASK_COUNT)


def test_invalid_limit_and_offset_are_ignored_in_the_response(client: FlaskClient) -> None:
    response = client.get("/tasks?limit=-3&offset=abc")
    body = response.get_json()
    assert response.status_code == 200
    assert (body["limit"], body["offset"], len(body["items"])) == (50, 0, TASK_COUNT)


def test_offset_beyond_total_gives_200_and_no_items(client: FlaskClient) -> None:
    response = client.get("/tasks?offset=7")
    assert response.status_code == 200
    assert response.get_json()["items"] == []
    assert response.get_json()["total"] == TASK_COUNT


def test_range_header_gives_206_with_content_range(client: FlaskClient) -> None:
    response = client.get("/tasks", headers={"Range": "items 2-4"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == f"items 2-4/{TASK_COUNT}"
    body = response.get_json()
    assert (len(body["items"]), body["offset"], body["limit"], body["total"]) == (3, 2, 3, TASK_COUNT)
    full = client.get("/tasks").get_json()["items"]
    assert [item["ID"] for item in body["items"]] == [item["ID"] for item in full[2:5]]


def test_range_past_the_end_is_cut_to_the_collection(client: FlaskClient) -> None:
    response = client.get("/tasks", headers={"Range": "items 5-20"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == f"items 5-6/{TASK_COUNT}"
    assert len(response.get_json()["items"]) == 2


def test_range_covering_everything_gives_200_without_content_range(client: FlaskClient) -> None:
    response = client.get("/tasks", headers={"Range": f"items 0-{TASK_COUNT - 1}"})
    assert response.status_code == 200
    assert "Content-Range" not in response.headers
    assert len(response.get_json()["items"]) == TASK_COUNT


def test_range_starting_at_or_after_total_gives_416_with_the_total(client: FlaskClient) -> None:
    response = client.get("/tasks", headers={"Range": f"items {TASK_COUNT}-{TASK_COUNT + 2}"})
    assert response.status_code == 416
    assert response.headers["Content-Range"] == f"items */{TASK_COUNT}"
    assert response.mimetype == "application/problem+json"


def test_multi_range_gives_416(client: FlaskClient) -> None:
    response = client.get("/tasks", headers={"Range": "items 0-1,3-4"})
    assert response.status_code == 416
    assert response.get_json()["status"] == 416


@pytest.mark.parametrize("header", ["bytes=0-4", "items 4-1", "items x-y", "items"])
def test_malformed_range_header_is_ignored(client: FlaskClient, header: str) -> None:
    response = client.get("/tasks", headers={"Range": header})
    assert response.status_code == 200
    assert "Content-Range" not in response.headers
    assert len(response.get_json()["items"]) == TASK_COUNT


def test_query_parameters_win_over_range(client: FlaskClient) -> None:
    response = client.get("/tasks?limit=2", headers={"Range": "items 4-6"})
    assert response.status_code == 200
    assert "Content-Range" not in response.headers
    body = response.get_json()
    assert (body["offset"], body["limit"], len(body["items"])) == (0, 2, 2)


def test_range_applies_when_query_parameters_are_invalid(client: FlaskClient) -> None:
    response = client.get("/tasks?limit=zero", headers={"Range": "items 0-1"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == f"items 0-1/{TASK_COUNT}"


def test_range_counts_after_search(client: FlaskClient) -> None:
    response = client.get("/services?search=shop", headers={"Range": "items 1-5"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == "items 1-1/2"


def test_sort_unknown_and_dir_over_http(client: FlaskClient) -> None:
    def listed(query: str) -> list[str]:
        return [item["Spec"]["Name"] for item in client.get(f"/services{query}").get_json()["items"]]

    assert listed("?sort=nope") == ["shop_web_api", "shop_db", "monitor"]
    assert listed("?sort=name&dir=desc") == ["shop_web_api", "shop_db", "monitor"]
    assert listed("?sort=name&dir=sideways") == ["monitor", "shop_db", "shop_web_api"]
    assert listed("?search=WA") == ["shop_web_api"]


def test_search_is_ignored_on_the_task_list_over_http(client: FlaskClient) -> None:
    assert client.get("/tasks?search=shop_db").get_json()["total"] == TASK_COUNT


# --------------------------------------------------------------------------- order with a filter
def test_total_counts_items_after_search_and_filter(synced_cache: Cache) -> None:
    page = run(synced_cache, K.SERVICE, {"search": "shop", "filter": 'mode == "replicated"', "limit": "1"})
    assert (names(page), page.total) == (["shop_web_api"], 2)
    filtered = run(synced_cache, K.SERVICE, {"search": "shop", "filter": 'name.endsWith("_db")'})
    assert (names(filtered), filtered.total) == (["shop_db"], 1)


def test_filter_then_sort_then_page(synced_cache: Cache) -> None:
    page = run(synced_cache, K.TASK, {"filter": 'desired_state == "running"', "sort": "state", "dir": "desc",
                                      "limit": "2", "offset": "1"})
    assert page.total == 5
    assert [entry.activation["state"] for entry in page.items] == ["running", "running"]


def test_a_blank_filter_is_no_filter(synced_cache: Cache) -> None:
    assert run(synced_cache, K.SERVICE, {"filter": "   "}).total == 3


def test_range_applies_to_the_filtered_collection(client: FlaskClient) -> None:
    response = client.get('/tasks?filter=state == "running"', headers={"Range": "items 3-9"})
    assert response.status_code == 206
    assert response.headers["Content-Range"] == "items 3-3/4"
    beyond = client.get('/tasks?filter=state == "running"', headers={"Range": "items 4-9"})
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == "items */4"


# --------------------------------------------------------------------------- client integers
BIG = "9" * 4400   # past Python's int-conversion limit (4,300 digits): int() raises, a 500 before


@pytest.mark.parametrize("text", ["+5", " 5", "5 ", "5_0", "\u0661\u0662", "\uff15", "0x5", "5.0", "-0"])
def test_limit_and_offset_accept_ascii_digits_only(text: str) -> None:
    page = parse_page({"limit": text, "offset": text}, None)
    assert page == PageRequest(DEFAULT_LIMIT, 0)


def test_a_huge_limit_clamps_and_a_huge_offset_is_past_the_end() -> None:
    page = parse_page({"limit": BIG, "offset": BIG}, None)
    assert page.limit == MAX_LIMIT and page.offset == HUGE


def test_a_huge_range_end_reads_to_the_end_and_a_huge_start_is_past_it() -> None:
    assert parse_range(f"items=0-{BIG}") == (0, HUGE)
    assert parse_page({}, f"items=2-{BIG}") == PageRequest(MAX_LIMIT, 2, (2, HUGE))
    assert parse_range(f"items={BIG}-{BIG}") == (HUGE, HUGE)


@pytest.mark.parametrize("header", ["items=\u0660-\u0665", "items=0-5\u00a0", "items=+0-5"])
def test_a_range_with_non_ascii_digits_is_malformed(header: str) -> None:
    assert parse_range(header) is None


@pytest.mark.parametrize(("args", "header", "status"), [
    ({}, f"items=0-{BIG}", 200), ({}, f"items=1-{BIG}", 206), ({}, f"items={BIG}-{BIG}", 416),
    ({"limit": BIG}, None, 200), ({"offset": BIG}, None, 200), ({"limit": BIG, "offset": BIG}, None, 200),
])
def test_huge_numbers_over_http_are_never_a_500(client: FlaskClient, args: dict[str, str], header: str | None,
                                                status: int) -> None:
    response = client.get("/tasks", query_string=args, headers={"Range": header} if header else {})
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    if "offset" in args:
        assert response.get_json()["items"] == []
