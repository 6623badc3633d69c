"""A real feed reader (docs/history-and-feeds.md): newsboat keys articles by entry id across all its subscriptions, so a
per-service feed subscribed beside ``/history.atom`` looked empty while both feeds gave one record the same
id. Entry ids are now per feed (``app.history.entries.feed_entry_id``). newsboat runs in a tmux pane (its own
tmux server socket) against gunicorn following the lab swarm; the screen and newsboat's cache both must show
the per-service feed with all its entries."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import feedparser
import pytest
import requests

from tests.conftest import wait_for
from tests.integration.engine_state import sleeper
from tests.integration.test_service_detail_live import dclient  # noqa: F401

pytestmark = pytest.mark.integration


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/setup (it installs newsboat and tmux)", pytrace=False)
    return path


@pytest.fixture
def changed_service(server: str, dclient: docker.DockerClient) -> Iterator[tuple[str, str]]:  # noqa: F811
    """A sleeper scaled once: its feed holds a create and an update (and its tasks' records are elsewhere)."""
    service = sleeper(dclient, f"shoal-nb-{uuid.uuid4().hex[:8]}")
    try:
        wait_for(lambda: _count(server, f"/services/{service.id}.atom") >= 1, 10, message="the create entry")
        service.reload()
        service.scale(2)
        wait_for(lambda: _count(server, f"/services/{service.id}.atom") >= 2, 10, message="the update entry")
        yield service.id, service.name
    finally:
        service.remove()


def _count(server: str, path: str) -> int:
    return len(feedparser.parse(requests.get(server + path, timeout=10).content).entries)


class Pane:
    """newsboat in a detached tmux session on a private tmux server (``-L``): killing it touches nothing else."""

    def __init__(self, tmux: str, workdir: Path, command: list[str]) -> None:
        self.tmux, self.socket = tmux, f"shoal-nb-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "HOME": str(workdir), "LANG": "C.UTF-8", "TERM": "xterm"}
        subprocess.run([tmux, "-L", self.socket, "new-session", "-d", "-s", "nb", "-x", "200", "-y", "50",
                        *command], check=True, env=env, timeout=10)

    def keys(self, *keys: str) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "send-keys", "-t", "nb", *keys], check=True, timeout=10)

    def screen(self) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, "capture-pane", "-p", "-t", "nb"], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], check=False, timeout=10,
                       capture_output=True)


def test_newsboat_shows_a_per_service_feed_beside_the_history_feed(server: str, changed_service: tuple[str, str],
                                                                   tmp_path: Path) -> None:
    newsboat, tmux = _tool("newsboat"), _tool("tmux")
    service_id, name = changed_service
    history_url, service_url = f"{server}/history.atom?limit=200", f"{server}/services/{service_id}.atom"
    expected = _count(server, f"/services/{service_id}.atom")
    (tmp_path / "urls").write_text(f"{history_url}\n{service_url}\n")
    (tmp_path / "config").write_text("reload-threads 1\ndownload-timeout 10\nshow-read-feeds yes\n")
    cache = tmp_path / "cache.db"
    pane = Pane(tmux, tmp_path, [newsboat, "-u", str(tmp_path / "urls"), "-C", str(tmp_path / "config"),
                                 "-c", str(cache)])
    try:
        wait_for(lambda: "Your feeds" in (screen := pane.screen()) and "R:Reload All" in screen, 30, interval=0.1,
                 message="newsboat's feed list, ready for keys")
        pane.keys("R")                                           # reload all feeds
        row = re.compile(rf"\((\d+)/(\d+)\)\s+Shoal: changes of service {re.escape(name)}")

        def service_row() -> re.Match[str] | None:
            return row.search(pane.screen())

        found = wait_for(service_row, 30, interval=0.5, message="the per-service feed's row in newsboat")
        assert isinstance(found, re.Match)
        unread, total = int(found.group(1)), int(found.group(2))
        screen = pane.screen()
        assert (unread, total) == (expected, expected), screen   # all its entries, none taken as already seen
        assert "Shoal: change history" in screen, screen
        pane.keys("q")
        wait_for(lambda: "nb" not in subprocess.run([tmux, "-L", pane.socket, "ls"], capture_output=True,
                                                    text=True, timeout=10).stdout, 10, interval=0.2,
                 message="newsboat to quit")
    finally:
        pane.close()
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT feedurl, guid FROM rss_item").fetchall()
    by_feed: dict[str, set[str]] = {}
    for feed, guid in rows:
        by_feed.setdefault(feed, set()).add(guid)
    assert len(by_feed.get(service_url, ())) == expected, by_feed.keys()
    assert len(by_feed.get(history_url, ())) >= expected
    assert not by_feed[service_url] & by_feed[history_url], "one id in two feeds: newsboat would keep one"
