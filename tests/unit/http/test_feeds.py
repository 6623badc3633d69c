"""Atom and JSON Feed on lists, details and /history; the /history collection (app.http.history)."""

from __future__ import annotations

import copy

import feedparser
import pytest
from flask.testing import FlaskClient

from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.support import Harness

ATOM, FEED_JSON = "application/atom+xml", "application/feed+json"
FEEDS = ["/services", f"/services/{o.SVC_WEB}", "/stacks/shop", "/history", f"/volumes/{o.VOL_SHOP}",
         "/tasks", f"/nodes/{o.NODE_WORKER}", "/events"]   # /events.atom: the feed the HTML shell links


def _atom(client: FlaskClient, url: str, **headers: str) -> feedparser.FeedParserDict:
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == ATOM
    parsed = feedparser.parse(response.data)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return parsed


def _next(parsed: feedparser.FeedParserDict) -> str | None:
    return next((link.href for link in parsed.feed.get("links", []) if link.rel == "next"), None)


def _scale(harness: Harness, replicas: int) -> None:
    service = copy.deepcopy(next(s for s in o.cluster()[ResourceKind.SERVICE] if s["ID"] == o.SVC_WEB))
    service["Spec"]["Mode"]["Replicated"]["Replicas"] = replicas
    service["Version"]["Index"] += replicas
    harness.cache.upsert(ResourceKind.SERVICE, service)


@pytest.mark.parametrize("path", FEEDS)
def test_every_feed_parses_and_next_walks_the_whole_selection(client: FlaskClient, path: str) -> None:
    first = _atom(client, path + ".atom")
    everything = [entry.id for entry in first.entries]
    assert everything, f"{path}: empty feed"
    walked, url, pages = [], path + ".atom?limit=2", 0
    while url is not None and pages < 100:
        pages += 1
        parsed = _atom(client, url)
        walked += [entry.id for entry in parsed.entries]
        url = _next(parsed)
    assert walked == everything and len(set(walked)) == len(walked)
    assert len(everything) < 50 and pages == -(-len(everything) // 2)   # no empty trailing page


def test_accept_selects_atom_and_json_feed_and_extensions_win(client: FlaskClient) -> None:
    assert client.get("/services", headers={"Accept": ATOM}).mimetype == ATOM
    assert client.get("/services", headers={"Accept": FEED_JSON}).mimetype == FEED_JSON
    assert client.get("/services.feed.json", headers={"Accept": ATOM}).mimetype == FEED_JSON
    assert client.get("/history.atom", headers={"Accept": "application/json"}).mimetype == ATOM


def test_feed_and_entry_ids_are_stable_and_entries_link_their_resource(client: FlaskClient) -> None:
    one, two = _atom(client, f"/services/{o.SVC_WEB}.atom"), _atom(client, f"/services/{o.SVC_WEB}.atom")
    assert one.feed.id == two.feed.id == f"urn:service:feed:/services/{o.SVC_WEB}"
    assert [e.id for e in one.entries] == [e.id for e in two.entries]
    entry = one.entries[0]
    assert entry.id.startswith(f"urn:service:feed:/services/{o.SVC_WEB}#") and entry.id.rsplit("-", 1)[1].isdigit()
    links = {link.rel: link.href for link in entry.links}
    assert links["related"] == f"/services/{o.SVC_WEB}" and links["alternate"].startswith("/history/")
    assert {tag.term for tag in entry.tags} == {"service", "create"}
    assert _atom(client, f"/services/{o.SVC_WEB}.atom?before=999999").feed.id == one.feed.id


def test_an_update_entry_says_what_changed(harness: Harness, client: FlaskClient) -> None:
    _scale(harness, 4)
    entry = _atom(client, f"/services/{o.SVC_WEB}.atom?action=update").entries[0]
    assert entry.title.endswith("replicas 2→4")
    assert "Spec.Mode.Replicated.Replicas: 2 → 4" in entry.content[0].value
    body = client.get(f"/history?type=service&resourceId={o.SVC_WEB}&action=update").get_json()
    assert body["items"][0]["summary"] == "replicas 2→4"
    assert body["items"][0]["changes"] == [{"field": "Spec.Mode.Replicated.Replicas", "old": 2, "new": 4}]


def test_json_feed_carries_the_same_entries(client: FlaskClient) -> None:
    atom = _atom(client, "/history.atom?limit=5")
    document = client.get("/history.feed.json?limit=5").get_json(force=True)
    assert document["version"] == "https://jsonfeed.org/version/1.1"
    assert [item["id"] for item in document["items"]] == [entry.id for entry in atom.entries]
    assert document["next_url"] == \
        "http://localhost/history.feed.json?limit=5&before=" + str(document["items"][-1]["_shoal"]["id"])
    assert document["items"][0]["_shoal"]["@type"] == "HistoryEntry"


def test_feeds_have_etags_304_and_vary_on_the_caller(harness: Harness, client: FlaskClient) -> None:
    response = client.get("/services.atom")
    etag = response.headers["ETag"]
    assert etag.endswith('-atom+xml"')
    assert {v.strip() for v in response.headers["Vary"].split(",")} >= {"Accept", "Authorization", "Cookie"}
    assert client.get("/services.atom", headers={"If-None-Match": etag}).status_code == 304
    _scale(harness, 7)
    assert client.get("/services.atom", headers={"If-None-Match": etag}).status_code == 200
    feed = client.get("/services.feed.json")
    assert feed.headers["ETag"] != etag and feed.headers["ETag"].endswith('-feed+json"')


def test_json_responses_link_their_feeds(client: FlaskClient) -> None:
    link = client.get("/history?type=service&limit=3").headers["Link"]
    assert '</history.atom?type=service>; rel="alternate"; type="application/atom+xml"' in link
    assert '</history.feed.json?type=service>; rel="alternate"; type="application/feed+json"' in link
    assert 'rel="alternate"' not in client.get(f"/services/{o.SVC_WEB}/tasks").headers["Link"]
    assert 'rel="alternate"' not in client.get("/services.atom").headers["Link"]


def test_history_collection_pages_without_gaps(client: FlaskClient) -> None:
    everything = client.get("/history?limit=200").get_json()
    assert everything["@type"] == "Collection" and everything["offset"] == 0
    ids = [item["id"] for item in everything["items"]]
    assert ids == sorted(ids, reverse=True) and everything["total"] == len(ids) and "next" not in everything
    walked, url = [], "/history?limit=4"
    while url:
        response = client.get(url)
        body = response.get_json()
        walked += [item["id"] for item in body["items"]]
        url = body.get("next")
        assert (url is not None) == ('rel="next"' in response.headers["Link"])
    assert walked == ids
    entry = client.get(f"/history/{ids[0]}").get_json()
    assert entry == everything["items"][0]


@pytest.mark.parametrize("query", ["type=pods", "action=delete", "before=x", "before=-3", "resourceId="])
def test_bad_history_parameters_are_400_api012(client: FlaskClient, query: str) -> None:
    for path in ("/history", "/history.atom"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, (path, query)
        assert response.get_json(force=True)["code"] == "API012"


def test_a_feed_of_a_removed_object_serves_its_records_then_404(harness: Harness, client: FlaskClient) -> None:
    harness.cache.remove(ResourceKind.CONFIG, o.CFG_OTHER)
    parsed = _atom(client, f"/configs/{o.CFG_OTHER}.atom")
    assert [tag.term for tag in parsed.entries[0].tags] == ["config", "remove"]
    assert client.get(f"/configs/{o.CFG_OTHER}").status_code == 404
    assert client.get("/configs/nosuchconfig.atom").status_code == 404
    assert client.get("/history/999999").status_code == 404


def test_feed_limits_clamp_and_default(client: FlaskClient) -> None:
    assert len(_atom(client, "/history.atom?limit=0").entries) == min(50, len(_atom(client, "/history.atom").entries))
    document = client.get("/history.feed.json?limit=100000").get_json(force=True)
    assert len(document["items"]) <= 200


def test_link_headers_stay_ascii_and_errors_link_no_feed(client: FlaskClient) -> None:
    """A path with non-ASCII characters once put them raw into the alternate Link: gunicorn answered 500."""
    response = client.get("/nodes/%C2%80%C3%A9x")
    assert response.status_code == 404
    response.headers["Link"].encode("ascii")
    assert 'rel="alternate"' not in response.headers["Link"]


@pytest.mark.parametrize(("path", "feed"), [("/", "/events"), ("/services", "/services"), ("/history", "/history")])
def test_the_html_shell_links_both_feeds_and_they_answer(client: FlaskClient, path: str, feed: str) -> None:
    head = client.get(path, headers={"Accept": "text/html"}).get_data(as_text=True).split("</head>", 1)[0]
    for extension, media in ((".atom", ATOM), (".feed.json", FEED_JSON)):
        assert f'type="{media}" title="Cluster changes"\n        href="{feed}{extension}"' in head
        assert client.get(feed + extension).mimetype == media


def test_one_record_has_a_different_entry_id_in_every_feed(client: FlaskClient) -> None:
    """newsboat keys articles by id across subscriptions: a shared id hid the per-service feed."""
    feeds = ("/history.atom", "/services.atom", f"/services/{o.SVC_WEB}.atom", "/history.atom?type=service",
             "/events.atom")
    ids = {path: {e.id.rsplit("-", 1)[1]: e.id for e in _atom(client, path + ("&" if "?" in path else "?")
                                                                 + "limit=200").entries} for path in feeds}
    record = next(iter(ids[f"/services/{o.SVC_WEB}.atom"]))
    assert ids["/history.atom"][record].startswith("urn:service:history:")    # the documented form
    per_feed = [ids[path][record] for path in feeds]
    assert len(set(per_feed)) == len(feeds), per_feed
    assert ids["/services.atom"][record].startswith("urn:service:feed:/services#")
    assert ids["/history.atom?type=service"][record].startswith("urn:service:feed:/history?type=service#")
