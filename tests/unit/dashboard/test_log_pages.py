"""The log pages (templates/pages/logs/*) on the fake cluster: the JSON answer of the log URL rendered as
lines, with the query form, download link, search highlight, render cap and problems.

The engine's log endpoint is replaced by :class:`FakeLogs` (the one piece the fake cluster engine lacks):
everything above it (parameters, selection, labels from the cache, negotiation, the page) is the real code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from app.engine.logs import LogTarget
from app.logs.facility import log_facility
from app.logs.lines import LogLine
from tests.unit import objects as o

if TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

    from tests.unit.support import Harness

HTML = {"Accept": "text/html"}
T0 = 1_764_000_000_000_000_000          # 2025-11-24T16:00:00Z in ns


@dataclass
class FakeReader:
    lines: list[LogLine]

    def batches(self) -> Iterator[list[LogLine]]:
        if self.lines:
            yield self.lines

    def close(self) -> None:
        pass


@dataclass
class FakeLogs:
    """The engine's log endpoint: per target, the newest ``tail`` lines of the requested stream."""

    by_target: dict[str, list[LogLine]]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def open(self, target: LogTarget, *, follow: bool, since_ns: int | None = None, tail: int | None = None,
             stream: str | None = None) -> FakeReader:
        self.calls.append({"target": target.object_id, "tail": tail, "stream": stream, "since": since_ns})
        lines = [line for line in self.by_target.get(target.object_id, [])
                 if (stream is None or line.stream == stream) and (since_ns is None or line.ns >= since_ns)]
        return FakeReader(lines[-tail:] if tail else lines)


def line(i: int, message: str, task: str = o.TASK_WEB_1, stream: str = "stdout") -> LogLine:
    return LogLine(T0 + i * 1_000_000, stream, message,
                   {"taskId": task, "serviceId": o.SVC_WEB, "nodeId": o.NODE_MANAGER})


WEB_LINES = [line(0, "starting <b>web</b>"), line(1, "Hello World", stream="stderr"),
             line(2, '{"level": "info", "msg": "ready"}'), line(3, "hello again", o.TASK_WEB_2)]


@pytest.fixture
def app(shared_harness: Harness) -> Iterator[Flask]:
    """One synced app for the module (the pages only read); each test gets the real engine client back."""
    facility = log_facility(shared_harness.app)
    engine = facility.engine
    yield shared_harness.app
    facility.engine = engine


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def fake_logs(app: Flask) -> FakeLogs:
    web_1 = [x for x in WEB_LINES if x.attrs["taskId"] == o.TASK_WEB_1]
    fake = FakeLogs({o.SVC_WEB: list(WEB_LINES), o.TASK_WEB_1: web_1, o.SVC_DB: [line(5, "db up", o.TASK_DB_1)]})
    log_facility(app).engine = fake  # type: ignore[assignment]
    return fake


def page_of(client: FlaskClient, url: str, status: int = 200) -> str:
    answer = client.get(url, headers=HTML)
    assert answer.status_code == status, answer.get_data(as_text=True)[-2000:]
    assert answer.mimetype == "text/html"
    return answer.get_data(as_text=True)


def items(page: str) -> list[str]:
    return re.findall(r"<li data-out=.*?</li>", page, re.S)


def test_service_logs_render_every_line_of_the_json_answer(client: FlaskClient, fake_logs: FakeLogs) -> None:
    url = f"/services/{o.SVC_WEB}/logs"
    answer = client.get(url).get_json()
    page = page_of(client, url)
    main = page.split("<main", 1)[1].split(">", 1)[0]
    assert "data-stream" not in main, "logs.js opens the tab's one stream, live.js none"
    assert "<title>Logs · shop_web_api · Shoal</title>" in page
    assert f'<a href="/services/{o.SVC_WEB}">shop_web_api</a>' in page
    rows = items(page)
    assert len(rows) == len(answer["lines"]) == 4
    for row, json_line in zip(rows, answer["lines"], strict=True):
        assert f'datetime="{json_line["timestamp"]}"' in row
        assert f'data-out="{json_line["stream"]}"' in row and f"out-{json_line['stream']}" in row
        slot = 1 if json_line["attrs"]["taskId"] == o.TASK_WEB_1 else 2
        assert f'href="/tasks/{json_line["attrs"]["taskId"]}"' in row and f">shop_web_api.{slot}</a>" in row
    assert "starting &lt;b&gt;web&lt;/b&gt;" in rows[0] and "<b>web" not in page
    assert '<span class="out out-stderr">stderr</span>' in rows[1]
    # a JSON message: the text in a summary, the decoded object pretty-printed when expanded
    assert "<details class=\"msg\">" in rows[2] and "&#34;level&#34;: &#34;info&#34;," in rows[2]
    assert f'data-cursor="{answer["cursor"]}"' in page and f'data-tail="{url}"' in page
    assert "data-show-task" in page and "4 lines" in page


def test_task_logs_name_the_replica_and_have_no_task_column(client: FlaskClient, fake_logs: FakeLogs) -> None:
    page = page_of(client, f"/tasks/{o.TASK_WEB_1}/logs")
    assert f'<h1>Logs · <a href="/tasks/{o.TASK_WEB_1}">shop_web_api.1</a></h1>' in page
    rows = items(page)
    assert len(rows) == 3 and not any('class="task"' in row for row in rows)
    assert "data-show-task" not in page
    assert fake_logs.calls == [{"target": o.TASK_WEB_1, "tail": 500, "stream": None, "since": None}]


def test_stack_logs_merge_its_services(client: FlaskClient, fake_logs: FakeLogs) -> None:
    page = page_of(client, "/stacks/shop/logs")
    assert {call["target"] for call in fake_logs.calls} == {o.SVC_WEB, o.SVC_DB}
    assert '<h1>Logs · <a href="/stacks/shop">stack shop</a></h1>' in page
    rows = items(page)
    assert len(rows) == 5 and ">shop_db.1</a>" in rows[-1] and "db up" in rows[-1]


def test_the_form_carries_the_api_parameters(client: FlaskClient, fake_logs: FakeLogs) -> None:
    page = page_of(client, f"/services/{o.SVC_WEB}/logs?limit=2&stream=stdout&q=x&only=1&follow=1")
    assert fake_logs.calls[-1] == {"target": o.SVC_WEB, "tail": 2, "stream": "stdout", "since": None}
    assert len(items(page)) == 2 and all('data-out="stdout"' in row for row in items(page))
    assert "<option selected>stdout</option>" in page and "<option selected>2</option>" in page
    # the download link: the same answer as JSON, without the page-only parameters
    assert f'href="/services/{o.SVC_WEB}/logs.json?limit=2&amp;stream=stdout" download' in page
    assert 'data-stream-param="stdout"' in page and "data-follow" in page
    assert re.search(r'<input id="log-q" name="q" type="search" value="x"', page)


def test_the_html_suffix_links_to_the_log_url_itself(client: FlaskClient, fake_logs: FakeLogs) -> None:
    page = page_of(client, f"/services/{o.SVC_WEB}/logs.html?since=5m")
    assert f'action="/services/{o.SVC_WEB}/logs"' in page and f'data-tail="/services/{o.SVC_WEB}/logs"' in page
    assert f'href="/services/{o.SVC_WEB}/logs.json?since=5m"' in page


def test_search_highlights_case_insensitively_and_only_keeps_hits(client: FlaskClient, fake_logs: FakeLogs) -> None:
    rows = items(page_of(client, f"/services/{o.SVC_WEB}/logs?q=HELLO"))
    assert "<mark>Hello</mark> World" in rows[1] and "<mark>hello</mark> again" in rows[3]
    assert [('class="hit"' in row) for row in rows] == [False, True, False, True]
    assert "only-hits" not in page_of(client, f"/services/{o.SVC_WEB}/logs?q=hello")
    assert 'class="logs only-hits"' in page_of(client, f"/services/{o.SVC_WEB}/logs?q=hello&only=1")
    escaped = items(page_of(client, f"/services/{o.SVC_WEB}/logs?q=<b>"))[0]
    assert "starting <mark>&lt;b&gt;</mark>web&lt;/b&gt;" in escaped


def test_a_long_answer_renders_only_the_newest_lines(client: FlaskClient, app: Flask) -> None:
    log_facility(app).engine = FakeLogs({o.SVC_WEB: [line(i, f"n{i}") for i in range(6000)]})  # type: ignore[assignment]
    page = page_of(client, f"/services/{o.SVC_WEB}/logs?limit=10000")
    rows = items(page)
    assert len(rows) == 5000 and ">n1000<" in rows[0] and ">n5999<" in rows[-1]
    assert "6000 lines (5000 shown: download for all)" in page


def test_parameter_problems_render_beside_the_form(client: FlaskClient, fake_logs: FakeLogs) -> None:
    page = page_of(client, f"/services/{o.SVC_WEB}/logs?stream=both", 400)
    assert "<code>LOG002</code>" in page and not fake_logs.calls
    assert re.search(r'<select id="log-stream" name="stream" aria-invalid="true"', page)
    page = page_of(client, f"/services/{o.SVC_WEB}/logs?since=yesterday", 400)
    assert "<code>LOG003</code>" in page and re.search(r'id="log-since"[^>]*aria-invalid="true"', page)
    assert 'value="yesterday"' in page and "<li data-out" not in page


def test_missing_objects_and_engine_failures(client: FlaskClient) -> None:
    page = page_of(client, "/services/nosuchservice/logs", 404)
    assert 'role="alert"' in page and "Logs · <a href=\"/services/nosuchservice\">nosuchservic</a>" in page
    # the unit app's engine socket does not exist: the JSON answer's LOG006, on the page
    page = page_of(client, f"/services/{o.SVC_WEB}/logs", 500)
    assert "<code>LOG006</code>" in page and "<li data-out" not in page


def test_before_the_first_sync(unsynced: Harness) -> None:
    answer = unsynced.app.test_client().get(f"/services/{o.SVC_WEB}/logs", headers=HTML)
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert "ENG001" in html.unescape(answer.get_data(as_text=True))
