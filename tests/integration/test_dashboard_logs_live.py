"""The log pages against the lab swarm, through the real gunicorn and headless Chromium: a service printing
``line <n>`` every 0.2 s; its page shows the lines without JS, Follow appends new lines over the URL's own
tail without a reload (one event stream for the tab), Pause stops them appearing (and Resume brings the
buffered ones), the search highlights, the stream filter hides; no console error, axe clean."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import httpx
import pytest
import requests

from tests.conftest import free_port, wait_for
from tests.integration.dashboard_browser import (
    assert_accessible,
    browser,  # noqa: F401 - the fixture
    screenshot,
    visit,
)
from tests.integration.engine_state import IMAGE, TEST_LABEL

pytestmark = pytest.mark.integration
PRINTER = "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done"
HTML = {"Accept": "text/html"}
NEW_LINES_WITHIN = 10.0     # seconds: lines are written every 0.2 s, delivered within ~1 s (docs/logs.md)
STACK = f"dashlogs{uuid.uuid4().hex[:6]}"      # the printer is a stack's only service
STACK_LABEL = "com.docker.stack.namespace"


@pytest.fixture(scope="module")
def printer(server: str, docker_host: str) -> Iterator[str]:
    """The printing service's id, once Shoal's cache has it and its logs answer lines."""
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    service = client.services.create(IMAGE, ["sh", "-c", PRINTER], name=f"{STACK}_printer",
                                     labels={TEST_LABEL: "1", STACK_LABEL: STACK},
                                     init=True, stop_grace_period=1_000_000_000,
                                     endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"))  # type: ignore[no-untyped-call]
    try:
        wait_for(lambda: requests.get(f"{server}/services/{service.id}", timeout=5).status_code == 200, 30,
                 message="the service in the cache")
        wait_for(lambda: len(log_json(server, service.id)["lines"]) >= 35, 90, interval=0.3,
                 message="35 lines written")
        yield str(service.id)
    finally:
        service.remove()
        client.close()


def log_json(server: str, service_id: str, **params: str) -> dict[str, Any]:
    answer = requests.get(f"{server}/services/{service_id}/logs", params=params, timeout=15)
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def recorded_streams(page: Any) -> list[str]:
    """The URLs of the event streams the page opens from now on."""
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url)
            if "event-stream" in (req.headers.get("accept") or "") else None)
    return urls


def wait_lines(page: Any, count: int, timeout: float = NEW_LINES_WITHIN) -> None:
    """Until the list holds ``count`` lines; on timeout, fail with the page's state and last lines."""
    try:
        page.wait_for_function(f"() => document.querySelectorAll('ol.log-lines li').length >= {count}",
                               timeout=timeout * 1000)
    except Exception as exc:
        state = page.get_attribute(".log-state", "data-state")
        raise AssertionError(f"{count} lines not shown within {timeout}s: state {state}, note "
                             f"{page.inner_text('.log-note')!r}, last {shown(page)[-3:]}") from exc


def numbers(texts: list[str]) -> list[int]:
    return [int(match.group(1)) for text in texts if (match := re.fullmatch(r"line (\d+)", text.strip()))]


def shown(page: Any) -> list[str]:
    """The texts of the visible lines, oldest first."""
    return list(page.eval_on_selector_all("ol.log-lines li", "els => els.filter(e => e.offsetParent)"
                                          ".map(e => e.querySelector('.text').textContent)"))


def test_the_page_renders_the_lines_without_scripts(server: str, printer: str) -> None:
    answer = requests.get(f"{server}/services/{printer}/logs", params={"limit": "20"}, headers=HTML, timeout=15)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html")
    page = answer.text
    assert "data-stream=" not in page.split("<main", 1)[1].split(">", 1)[0]   # the tab's stream is logs.js's
    rendered = numbers(re.findall(r'<span class="text">([^<]*)</span>', page))
    assert 10 <= len(rendered) <= 20 and rendered == sorted(rendered)
    assert f'href="/services/{printer}/logs.json?limit=20"' in page
    assert re.search(r'<option selected>20</option>', page)   # an unlisted limit stays selected
    # the download link is the same answer as JSON
    downloaded = requests.get(f"{server}/services/{printer}/logs.json", params={"limit": "20"}, timeout=15).json()
    assert downloaded["@type"] == "LogResponse" and len(downloaded["lines"]) == 20
    # a server-side search highlights; "only matching" keeps only the hits
    only = requests.get(f"{server}/services/{printer}/logs", params={"q": "LINE 1", "only": "1"}, headers=HTML,
                        timeout=15).text
    assert "<mark>line 1</mark>" in only and 'class="logs only-hits"' in only


def test_task_and_stack_pages(server: str, printer: str, engine: docker.APIClient) -> None:
    running = wait_for(lambda: [t for t in engine.tasks(filters={"service": printer})  # type: ignore[no-untyped-call]
                                if t["Status"]["State"] == "running"], 30, message="the running task")
    task = running[0]  # type: ignore[index]
    page = requests.get(f"{server}/tasks/{task['ID']}/logs.html", timeout=15)
    assert page.status_code == 200
    assert f'<h1>Logs · <a href="/tasks/{task["ID"]}">{STACK}_printer.1</a></h1>' in page.text
    assert 'class="task"' not in page.text and "line " in page.text      # one task: no task column
    stack = requests.get(f"{server}/stacks/demo/logs", params={"limit": "50"}, headers=HTML, timeout=15)
    assert stack.status_code == 200
    assert re.search(r'<a class="task" href="/tasks/\w+" title="demo_\w+\.\d+">demo_\w+\.\d+</a>', stack.text)
    # Problem pages through httpx: the OpenAPI check of `requests` (tests/conftest.py) knows problems only
    # as application/problem+json, while a browser gets the page of the problem at its status.
    bad = httpx.get(f"{server}/services/{printer}/logs", params={"since": "yesterday"}, headers=HTML, timeout=15)
    assert bad.status_code == 400 and "LOG003" in bad.text and 'id="log-since"' in bad.text
    assert re.search(r'id="log-since"[^>]*aria-invalid="true"', bad.text)
    assert httpx.get(f"{server}/services/nosuchservice/logs", headers=HTML, timeout=15).status_code == 404


def test_follow_pause_search_in_the_browser(server: str, printer: str, browser: Any) -> None:  # noqa: F811
    seen = visit(browser, f"{server}/services/{printer}/logs?limit=30", wait_for="ol.log-lines li")
    page = seen.page
    streams = recorded_streams(page)
    page.wait_for_selector(".log-tools:not([hidden])")
    first = numbers(shown(page))
    assert first and len(first) == 30

    page.click("[data-log-follow]")
    page.wait_for_selector(".log-state[data-state=following]", timeout=10_000)
    wait_lines(page, len(first) + 3)
    followed = numbers(shown(page))
    assert followed[:len(first)] == first and max(followed) > max(first)
    news = followed[len(first):]
    assert news == list(range(max(first) + 1, max(first) + 1 + len(news))), "new lines in order, none lost"
    assert "follow=1" in page.url
    assert len(streams) == 1 and f"/services/{printer}/logs" in streams[0], streams

    page.click("[data-log-pause]")
    page.wait_for_selector(".log-state[data-state=paused]")
    paused_at = len(shown(page))
    time.sleep(1.5)   # seven lines are written meanwhile
    assert len(shown(page)) == paused_at, "no line appears while paused"
    assert "while paused" in page.inner_text(".log-note")
    page.click("[data-log-pause]")
    page.wait_for_selector(".log-state[data-state=following]")
    wait_lines(page, paused_at + 5, 5)
    resumed = numbers(shown(page))
    assert resumed == list(range(resumed[0], resumed[0] + len(resumed))), "the buffered lines, none lost"

    page.fill("#log-q", "LINE 1")
    page.wait_for_selector("ol.log-lines mark")
    marks = page.eval_on_selector_all("ol.log-lines mark", "els => els.map(e => e.textContent)")
    assert marks and all(mark == "line 1" for mark in marks)
    hits = page.eval_on_selector_all("ol.log-lines li.hit .text", "els => els.map(e => e.textContent)")
    assert hits and all(text.startswith("line 1") for text in hits)
    page.check("input[name=only]")
    page.wait_for_function("() => new URL(location.href).searchParams.get('only') === '1'")
    assert all(text.startswith("line 1") for text in shown(page))
    page.uncheck("input[name=only]")
    page.fill("#log-q", "")
    page.wait_for_function("() => !document.querySelector('ol.log-lines mark')")

    page.select_option("#log-stream", "stderr")    # the printer writes only stdout
    page.wait_for_function("() => new URL(location.href).searchParams.get('stream') === 'stderr'")
    assert shown(page) == []
    page.select_option("#log-stream", "")
    assert len(shown(page)) > 0
    with page.expect_download(timeout=15_000) as download:      # the API's text form, fetched by the script
        page.click("[data-log-text]")
    assert download.value.suggested_filename == f"service-{printer}.log"
    text = Path(download.value.path()).read_text().splitlines()
    assert len(text) == 30 and all(re.fullmatch(rf"\S+Z {STACK}_printer\.1 stdout line \d+", row) for row in text)
    screenshot(page, "logs")
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()




# A TCP relay in its own process: killing it cuts every connection through it at once (a network drop).
RELAY = """
import socket, sys, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(64)
def pipe(source, sink):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(client):
    upstream = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)
while True:
    client, _ = server.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"""


def start_relay(port: int, upstream: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", RELAY, str(port), str(urlsplit(upstream).port)])
    try:
        wait_for(lambda: requests.get(f"http://127.0.0.1:{port}/-/health", timeout=2).status_code == 200, 20,
                 interval=0.1, message="the relay up")
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    return proc


def test_a_dropped_tail_resumes_after_its_last_line(server: str, printer: str, browser: Any) -> None:  # noqa: F811
    """Every connection of a following page is cut (its relay killed), then the relay comes back: the page
    shows "reconnecting", reopens the tail with ?lastEventId= and the lines go on, none lost or repeated."""
    port = free_port()
    relay = start_relay(port, server)
    try:
        seen = visit(browser, f"http://127.0.0.1:{port}/services/{printer}/logs?limit=20", wait_for="ol.log-lines li")
        page = seen.page
        streams = recorded_streams(page)
        page.click("[data-log-follow]")
        wait_lines(page, 23)
        relay.kill()
        relay.wait(10)
        page.wait_for_selector(".log-state[data-state=reconnecting]", timeout=10_000)
        page.wait_for_timeout(1000)       # lines are written during the outage
        relay = start_relay(port, server)
        page.wait_for_selector(".log-state[data-state=following]", timeout=30_000)
        count = len(shown(page))
        wait_lines(page, count + 5)
        assert len(streams) >= 2, streams
        assert all("lastEventId=" in url and "since=" not in url for url in streams[1:]), streams
        printed = numbers(shown(page))
        assert printed == list(range(printed[0], printed[0] + len(printed))), "no line lost or repeated"
        outage = [error for error in seen.errors if "net::ERR_" not in error]   # refused while the relay was down
        assert not outage, outage
        page.context.close()
    finally:
        relay.kill()
        relay.wait(10)


def test_the_dark_theme_with_highlights_is_accessible(server: str, printer: str, browser: Any) -> None:  # noqa: F811
    seen = visit(browser, f"{server}/services/{printer}/logs?limit=50&q=LINE", wait_for="ol.log-lines mark",
                 color_scheme="dark")
    page = seen.page
    page.wait_for_selector(".log-tools:not([hidden])")
    assert page.eval_on_selector_all("ol.log-lines mark", "els => els.length") == 50
    assert_accessible(page)
    seen.assert_clean()
    page.context.close()
