"""JSON Feed URLs are absolute (docs/history-and-feeds.md): on ``server.external_url``, else the request's
scheme and host, forwarding headers believed from trusted proxies only (``app.http.links.external_origin``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.config import ConfigError, Settings
from app.config.loading import load_settings
from app.http.feeds import FeedItem, FeedPage, render_json_feed
from app.http.links import absolute
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "shoal.example.org, inner.example"}


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[Harness]:
    harness = build_harness(FakeEngine(cluster()), **getattr(request, "param", {}))
    harness.start()
    try:
        yield harness
    finally:
        harness.stop()


def _urls(document: dict[str, Any]) -> list[str]:
    items = document["items"]
    return ([document["feed_url"], document["home_page_url"], document["next_url"], document["_shoal"]["first"]]
            + [item["url"] for item in items] + [item["external_url"] for item in items])


def _feed(harness: Harness, path: str, *, peer: str = "127.0.0.1", base_url: str = "http://localhost",
          **headers: str) -> dict[str, Any]:
    client = harness.app.test_client()
    response = client.get(path, headers=headers, base_url=base_url, environ_base={"REMOTE_ADDR": peer})
    assert response.status_code == 200, response.get_data(as_text=True)
    document: dict[str, Any] = response.get_json(force=True)
    return document


def test_without_a_configured_url_the_request_host_is_used(running: Harness) -> None:
    document = _feed(running, "/services.feed.json?limit=1&action=create,ref_changed", base_url="http://shoal.lab:8080")
    urls = _urls(document)
    assert all(url.startswith("http://shoal.lab:8080/") for url in urls), urls
    assert document["feed_url"] == "http://shoal.lab:8080/services.feed.json?limit=1&action=create%2Cref_changed"
    assert document["items"][0]["external_url"].startswith("http://shoal.lab:8080/services/")


def test_forwarding_headers_from_an_untrusted_peer_are_ignored(running: Harness) -> None:
    urls = _urls(_feed(running, "/history.feed.json?limit=1", peer="10.1.2.3", **FORWARDED))
    assert all(url.startswith("http://localhost/") for url in urls), urls


@pytest.mark.parametrize("running", [{"trusted_proxies": ("10.1.0.0/16",)}], indirect=True)
def test_a_trusted_proxy_sets_the_scheme_and_host(running: Harness) -> None:
    urls = _urls(_feed(running, "/history.feed.json?limit=1", peer="10.1.2.3", **FORWARDED))
    assert all(url.startswith("https://shoal.example.org/") for url in urls), urls
    outside = _urls(_feed(running, "/history.feed.json?limit=1", peer="10.2.0.1", **FORWARDED))
    assert all(url.startswith("http://localhost/") for url in outside), outside


@pytest.mark.parametrize("running", [{"trusted_proxies": ("10.1.0.0/16",)}], indirect=True)
def test_a_malformed_forwarded_host_keeps_the_paths(running: Harness) -> None:
    document = _feed(running, "/history.feed.json?limit=1", peer="10.1.2.3",
                     **{"X-Forwarded-Host": "evil.example/<script>", "X-Forwarded-Proto": "https"})
    assert document["feed_url"] == "/history.feed.json?limit=1"
    assert _feed(running, "/history.feed.json?limit=1", peer="10.1.2.3",
                 **{"X-Forwarded-Proto": "javascript"})["feed_url"] == "/history.feed.json?limit=1"


@pytest.mark.parametrize("running", [{"external_url": "https://ops.example.com/shoal", "base_path": "/sw",
                                      "trusted_proxies": ("10.1.0.0/16",)}], indirect=True)
def test_the_configured_external_url_wins_and_the_base_path_follows_it(running: Harness) -> None:
    document = _feed(running, "/sw/history.feed.json?limit=1", peer="10.1.2.3", base_url="http://other:1",
                     **FORWARDED)
    urls = _urls(document)
    assert all(url.startswith("https://ops.example.com/shoal/sw/") for url in urls), urls
    assert document["items"][0]["url"].startswith("https://ops.example.com/shoal/sw/history/")


@pytest.mark.parametrize("running", [{"external_url": "https://ops.example.com"}], indirect=True)
def test_atom_keeps_paths_that_readers_resolve_against_the_feed_url(running: Harness) -> None:
    body = running.app.test_client().get("/history.atom?limit=1").get_data(as_text=True)
    assert 'href="/history.atom?limit=1"' in body and "ops.example.com" not in body


def test_render_without_an_origin_keeps_paths_and_absolute_leaves_urls_alone() -> None:
    page = FeedPage("urn:x", "t", "/f.feed.json", "/f.feed.json", "/f", [FeedItem("i", "t", 0.0, "/i", "s")], 0.0)
    assert b'"feed_url":"/f.feed.json"' in render_json_feed(page)
    assert b'"url":"https://h/i"' in render_json_feed(page, "https://h")
    assert absolute("https://h", "https://elsewhere/x") == "https://elsewhere/x"


@pytest.mark.parametrize(("value", "expected"), [("https://ops.example.com/", "https://ops.example.com"),
                                                  ("http://10.0.0.1:8080/shoal", "http://10.0.0.1:8080/shoal")])
def test_the_external_url_key_is_parsed(value: str, expected: str) -> None:
    assert load_settings({"SERVICE_EXTERNAL_URL": value}).external_url == expected
    assert Settings().external_url is None


@pytest.mark.parametrize("value", ["ftp://x", "https://", "https://x/?q=1", "https://x/#f", "https://u:p@x",
                                   "https://x:99999"])
def test_a_bad_external_url_is_refused_at_start(value: str) -> None:
    with pytest.raises(ConfigError, match=r"SERVICE_EXTERNAL_URL|server\.external_url"):
        load_settings({"SERVICE_EXTERNAL_URL": value})
