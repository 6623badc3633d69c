"""History and feeds against the lab swarm, over HTTP through gunicorn: a real ``docker service update``
becomes one history entry with the right summary and diff; every feed parses in feedparser (bozo false)
and its ``next`` links walk the whole history; ``/history`` pages have no gaps or duplicates. Every JSON
response is checked against /api by the conftest (the JSON Feed against JsonFeedV1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import docker
import feedparser
import pytest
import requests

from tests.conftest import wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL, sleeper
from tests.integration.test_service_detail_live import dclient, second_tag, service_update  # noqa: F401

pytestmark = pytest.mark.integration
VISIBLE_WITHIN = 5.0
ATOM, FEED_JSON = "application/atom+xml", "application/feed+json"


@pytest.fixture
def updated_service(server: str, docker_host: str, dclient: docker.DockerClient,  # noqa: F811
                    second_tag: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    """A sleeper (1 replica, A=1) updated once with the CLI: 2 replicas, another image tag, A=2, B=3."""
    service = sleeper(dclient, f"shoal-feeds-{uuid.uuid4().hex[:8]}", env=["A=1"])
    try:
        wait_for(lambda: _entries(server, f"type=service&resourceId={service.id}&action=create"),
                 VISIBLE_WITHIN, message="the create entry")
        service_update(docker_host, service.id, "--replicas", "2", "--image", second_tag,
                       "--env-add", "A=2", "--env-add", "B=3")
        yield service.id, second_tag
    finally:
        service.remove()


def _entries(server: str, query: str) -> list[dict[str, Any]]:
    response = requests.get(f"{server}/history?{query}", timeout=10)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _spec_update(server: str, service_id: str) -> dict[str, Any] | None:
    for item in _entries(server, f"type=service&resourceId={service_id}&action=update&limit=200"):
        if any(change["field"] == "Spec.Mode.Replicated.Replicas" for change in item.get("changes", ())):
            return item
    return None


def test_a_docker_service_update_is_one_entry_with_summary_and_diff(server: str, updated_service) -> None:
    service_id, tag = updated_service
    entry = wait_for(lambda: _spec_update(server, service_id), VISIBLE_WITHIN, message="the update entry")
    assert isinstance(entry, dict)
    changes = {change["field"]: change for change in entry["changes"]}
    assert (changes["Spec.Mode.Replicated.Replicas"]["old"], changes["Spec.Mode.Replicated.Replicas"]["new"]) == (1, 2)
    image = changes["Spec.TaskTemplate.ContainerSpec.Image"]
    assert image["old"].startswith(IMAGE) and image["new"] == tag
    assert (changes['Spec.TaskTemplate.ContainerSpec.Env["A"]']["old"],
            changes['Spec.TaskTemplate.ContainerSpec.Env["A"]']["new"]) == ("1", "2")
    assert "old" not in changes['Spec.TaskTemplate.ContainerSpec.Env["B"]']
    assert changes['Spec.TaskTemplate.ContainerSpec.Env["B"]']["new"] == "3"
    assert entry["summary"].startswith(f"replicas 1→2, image {IMAGE.split('@')[0]}→{tag}, ")
    assert entry["audit"] is None and entry["resource"] == f"/services/{service_id}"
    assert requests.get(f"{server}{entry['@id']}", timeout=10).json() == entry

    feed = _parse(server, f"/services/{service_id}.atom?action=update")
    titles = [item.title for item in feed.entries]
    assert any("replicas 1→2" in title for title in titles), titles
    json_feed = requests.get(f"{server}/services/{service_id}.feed.json", timeout=10)
    assert json_feed.headers["Content-Type"].startswith(FEED_JSON)
    assert any(item["_shoal"]["id"] == entry["id"] for item in json_feed.json()["items"])


def _parse(server: str, path: str, **headers: str) -> feedparser.FeedParserDict:
    response = requests.get(server + path, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith(ATOM)
    headers = {name.lower(): value for name, value in response.headers.items()}   # as a reader sees them
    parsed = feedparser.parse(response.content, response_headers={**headers, "content-location": server + path})
    assert not parsed.bozo, (path, parsed.get("bozo_exception"))
    assert parsed.version == "atom10"
    return parsed


def _walk(server: str, path: str, pages: int = 200) -> list[str]:
    """Follow next from the first page to the end; the entry ids in order."""
    ids: list[str] = []
    url: str | None = server + path
    for _ in range(pages):
        assert url is not None
        parsed = _parse(server, url[len(server):])
        ids += [entry.id for entry in parsed.entries]
        url = next((urljoin(url, link.href) for link in parsed.feed.links if link.rel == "next"), None)
        if url is None:
            return ids
    raise AssertionError(f"{path}: more than {pages} pages")


@pytest.mark.parametrize("path", ["/services.atom?limit=200", "/history.atom?limit=20", "/stacks/demo.atom",
                                  "/nodes.atom?limit=100", "/configs.atom?limit=7"])
def test_every_feed_parses_and_next_walks_to_the_end(server: str, path: str) -> None:
    ids = _walk(server, path)
    assert ids, f"{path} is empty"
    assert len(ids) == len(set(ids)), f"{path}: an entry twice"
    seqs = [int(entry_id.rsplit("-", 1)[1]) for entry_id in ids]
    assert seqs == sorted(seqs, reverse=True)
    if path.startswith("/history"):
        assert len(ids) > 20, "the lab's first sync alone records more than one page"
        oldest = requests.get(f"{server}/history?limit=1&before={seqs[-1]}", timeout=10).json()
        assert oldest["items"] == [] and "next" not in oldest, "the walk stopped before the oldest entry"


def test_a_detail_feed_and_its_json_feed_agree(server: str) -> None:
    node = requests.get(f"{server}/nodes", timeout=10).json()["items"][0]
    atom = _parse(server, f"{node['@id']}.atom")
    json_feed = requests.get(f"{server}{node['@id']}", headers={"Accept": FEED_JSON}, timeout=10)
    assert json_feed.headers["Content-Type"].startswith(FEED_JSON)
    assert [item["id"] for item in json_feed.json()["items"]] == [entry.id for entry in atom.entries]
    assert atom.feed.id == f"urn:service:feed:{node['@id']}"


def test_history_pages_have_no_gaps_or_duplicates(server: str) -> None:
    seen: list[int] = []
    url: str | None = f"{server}/history?limit=15&action=create,update,remove,ref_changed"   # every record
    for _ in range(1_000):
        assert url is not None
        body = requests.get(url, timeout=10).json()
        seen += [item["id"] for item in body["items"]]
        url = urljoin(url, body["next"]) if "next" in body else None
        if url is None:
            break
    assert len(seen) > 15 and seen == list(range(seen[0], seen[0] - len(seen), -1)), "a gap or a duplicate"


def test_feeds_answer_304_and_vary_on_the_caller(server: str) -> None:
    first = requests.get(f"{server}/configs.atom", timeout=10)
    assert {v.strip() for v in first.headers["Vary"].split(",")} >= {"Accept", "Authorization", "Cookie"}
    again = requests.get(f"{server}/configs.atom", headers={"If-None-Match": first.headers["ETag"]}, timeout=10)
    assert again.status_code == 304
    assert 'type="application/atom+xml"' in requests.get(f"{server}/configs", timeout=10).headers["Link"]


@pytest.mark.parametrize("path", ["/history?type=pods", "/history.atom?before=soon", "/services.atom?action=x"])
def test_bad_feed_parameters_are_api012(server: str, path: str) -> None:
    response = requests.get(server + path, timeout=10)
    assert response.status_code == 400 and response.json()["code"] == "API012"


@pytest.fixture
def crash_looping(server: str, dclient: docker.DockerClient) -> Iterator[str]:  # noqa: F811
    """A service whose task exits at once and is restarted every 0.2 s: a flood of related changes."""
    service = dclient.services.create(
        IMAGE, ["sh", "-c", "exit 1"], name=f"shoal-crash-{uuid.uuid4().hex[:8]}", labels={TEST_LABEL: "1"},
        init=True, restart_policy=docker.types.RestartPolicy(condition="any", delay=200_000_000),
        endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"))
    try:
        yield service.id
    finally:
        service.remove()


def test_a_crash_looping_service_does_not_flood_history_or_feeds(server: str, crash_looping: str) -> None:
    service_id = crash_looping
    mine = f"type=service&resourceId={service_id}"
    related = wait_for(lambda: len(_entries(server, f"{mine}&action=ref_changed&limit=200")) >= 10, 30,
                       interval=0.5, message="ten related changes of the crash-looping service")
    assert related
    shown = _entries(server, f"{mine}&limit=200")
    assert shown and all(entry["action"] != "ref_changed" for entry in shown), "related changes by default"
    assert [entry["action"] for entry in shown][-1] == "create"
    both = _entries(server, f"{mine}&action=update,ref_changed&limit=200")
    assert "ref_changed" in {entry["action"] for entry in both} <= {"update", "ref_changed"}
    for path in ("/services.atom?limit=50", "/history.atom?limit=50", f"/services/{service_id}.atom"):
        titles = [entry.title for entry in _parse(server, path).entries]
        assert titles and not [t for t in titles if "related change" in t], (path, titles)
    flood = _parse(server, f"/services/{service_id}.atom?action=ref_changed")
    assert flood.entries and all("related change" in entry.title for entry in flood.entries)
    assert requests.get(f"{server}/services.atom?action=update,bogus", timeout=10).json()["code"] == "API012"


def test_json_feed_urls_are_absolute_on_the_requested_host(server: str) -> None:
    document = requests.get(f"{server}/history.feed.json?limit=2", timeout=10).json()
    urls = [document["feed_url"], document["home_page_url"], document["next_url"], document["_shoal"]["first"]]
    urls += [item["url"] for item in document["items"]] + [item["external_url"] for item in document["items"]]
    assert all(url.startswith(server + "/") for url in urls), urls
    follow = requests.get(document["next_url"], timeout=10).json()   # usable as given, no base needed
    assert follow["items"] and follow["items"][0]["id"] != document["items"][0]["id"]
    proxied = requests.get(f"{server}/history.feed.json?limit=1", timeout=10,
                           headers={"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}).json()
    assert proxied["feed_url"].startswith(server + "/"), "forwarding headers from an untrusted peer are ignored"
