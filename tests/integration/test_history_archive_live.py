"""The audit trail past the ring (docs/history-and-feeds.md) through real gunicorn on the lab swarm: a tiny ring
(``SERVICE_HISTORY_SIZE=100``, the minimum) and a few hundred changes made with the docker SDK. ``/history``
pages back past the ring with exactly the ids the SQLite file holds (no duplicate, none missing),
``/history/{old id}`` answers, the JSON Feed pages the same way, and all of it holds after a restart (which
loads only the ring)."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import docker
import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.engine_state import TEST_LABEL
from tests.integration.store_support import Server, committed, server_fixture

pytestmark = pytest.mark.integration

CONFIGS = 80   # 160 config records (create + remove): more than the ring's 100


@pytest.fixture
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


server = server_fixture()


def _walk(base: str, path: str, next_member: str, limit: int) -> list[dict[str, Any]]:
    """Every item of a paged JSON document (``/history`` or a JSON Feed) following its next links (bounded)."""
    items: list[dict[str, Any]] = []
    url: str | None = f"{base}{path}{'&' if '?' in path else '?'}limit={limit}"
    for _ in range(500):
        if url is None:
            return items
        answer = httpx.get(url, timeout=20)
        assert answer.status_code == 200, answer.text[:500]
        page = answer.json()
        items += page["items"]
        url = page.get(next_member)
        if url is not None and url.startswith("/"):
            url = base + url
    pytest.fail(f"{path} did not end within 500 pages")


def _config_ids(server: Server) -> list[int]:
    rows, _meta = committed(server.state)
    return sorted((seq for seq, (kind, action, _id) in rows.items() if kind == "config" and action != "ref_changed"),
                  reverse=True)


def _check_archive(server: Server, tags: set[str]) -> list[int]:
    expected = _config_ids(server)
    assert len(expected) >= 2 * CONFIGS > 100, len(expected)
    pages = _walk(server.base, "/history?type=config", "next", 37)
    seen = [entry["id"] for entry in pages]
    assert len(seen) == len(set(seen)), "a duplicate id across pages"
    assert seen == expected, (len(seen), len(expected), sorted(set(expected) - set(seen))[:5])
    names = {entry["name"] for entry in pages}
    assert tags <= {name.rsplit("-", 1)[-1] for name in names}
    feed = _walk(server.base, "/history.feed.json?type=config", "next_url", 50)
    feed_ids = [int(item["id"].rsplit("-", 1)[1]) for item in feed]
    assert feed_ids == expected
    everything = [entry["id"] for entry in _walk(server.base, "/history", "next", 200)]
    assert everything == sorted(set(everything), reverse=True) and set(expected) <= set(everything)
    oldest = expected[-1]
    answer = httpx.get(f"{server.base}/history/{oldest}", headers={"Accept": "application/json"}, timeout=10)
    assert answer.status_code == 200 and answer.json()["id"] == oldest and answer.json()["type"] == "config"
    missing = httpx.get(f"{server.base}/history/{oldest - 1_000_000_000}", timeout=10)
    assert missing.status_code == 404
    return expected


def test_history_pages_past_the_ring_into_the_store(server: Server, dclient: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    server.env["SERVICE_HISTORY_SIZE"] = "100"
    try:
        server.start()
        for number in range(CONFIGS):
            made.append(dclient.configs.create(name=f"shoal-archive-{number}-{tag}", data=b"x",
                                               labels={TEST_LABEL: "1"}))
        ids = {config.id for config in made}
        # every create seen before the removes start: a config removed before the watcher's inspect of its
        # create (a few ms) is never in the cache, so it has no records (this test is about the archive)
        wait_for(lambda: sum(1 for _seq, (kind, action, object_id) in committed(server.state)[0].items()
                             if object_id in ids and action == "create") == CONFIGS, 30,
                 message="every create committed to the store")
        for config in made:
            config.remove()
        made = []
        wait_for(lambda: sum(1 for _seq, (kind, action, object_id) in committed(server.state)[0].items()
                             if object_id in ids and action == "remove") == CONFIGS, 30,
                 message="every remove committed to the store")
        before = _check_archive(server, {tag})
        newest = sorted(committed(server.state)[0], reverse=True)
        assert before[-1] < newest[125], "the oldest config record could still be in the ring (100 + 25 related)"
        server.stop()
        server.start()
        after = _check_archive(server, {tag})
        assert after == before, "the archive changed across a restart"
    finally:
        for config in made:
            with contextlib.suppress(docker.errors.APIError):
                config.remove()
