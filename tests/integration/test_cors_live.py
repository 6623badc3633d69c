"""CORS through a real browser: headless Chromium loads a page from another 127.0.0.1 port, which reads a
list from Shoal (with a header that needs a preflight) and opens an EventSource on it. Last, the nginx
remedy of docs/streams.md: an EventSource behind nginx keeps reconnecting across a restart of Shoal.

Shoal runs under real gunicorn with ``SERVICE_CORS_ORIGINS`` naming one page origin and authentication by
trusted headers off (mode none), so what decides is CORS alone. The page reports what it saw by POSTing
to its own server (same origin), so no DevTools client is needed. The allowed page reads the list, its
ETag/Request-Id (exposed headers) and gets the stream open; the other page is blocked by the browser on
both, and Shoal refused its stream (403 ``SSE003``) rather than holding it open.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from gevent.pywsgi import WSGIServer

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage")

PAGE = """<!doctype html><meta charset="utf-8"><title>cors probe</title><script>
const SHOAL = %(shoal)s;
const out = {};
async function run() {
  try {
    const answer = await fetch(SHOAL + "/services", {headers: {"Accept": "application/json",
                                                                "Request-Id": "cors-probe-request-1"}});
    out.status = answer.status;
    out.etag = answer.headers.get("ETag");
    out.requestId = answer.headers.get("Request-Id");
    out.total = (await answer.json()).total;
  } catch (error) { out.fetchError = String(error); }
  await new Promise(resolve => {
    const source = new EventSource(SHOAL + "/events");
    const timer = setTimeout(() => { out.stream = "timeout"; source.close(); resolve(); }, 8000);
    source.onopen = () => { out.stream = "open"; clearTimeout(timer); source.close(); resolve(); };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        out.stream = "failed"; clearTimeout(timer); resolve();
      }
    };
  });
  await fetch("/report", {method: "POST", body: JSON.stringify(out)});
}
run();
</script>"""


class PageServer:
    """Serves the probe page on its own 127.0.0.1 port and keeps what the page reports."""

    def __init__(self, shoal: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.reports: list[dict[str, Any]] = []
        self._page = (PAGE % {"shoal": json.dumps(shoal)}).encode()
        self._server = WSGIServer(("127.0.0.1", self.port), self._app, log=None)

    def _app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"] == "/report":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            self.reports.append(json.loads(environ["wsgi.input"].read(min(length, 65536))))
            start_response("204 No Content", [])
            return []
        if environ["PATH_INFO"] == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [self._page]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not here"]

    def __enter__(self) -> PageServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(timeout=2)


def _browse(page: PageServer, tmp_path: Path) -> dict[str, Any]:
    """Open the page in a fresh headless Chromium and return its report (the browser is ended by its pid)."""
    profile = tmp_path / f"profile-{page.port}"
    log = (tmp_path / f"chromium-{page.port}.log").open("wb")
    browser = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", page.origin + "/"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: page.reports, 45, interval=0.2, message=f"the page at {page.origin} to report")
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait(5)
        log.close()
    return page.reports[0]


@pytest.fixture(scope="module")
def chromium() -> str:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium", pytrace=False)
    return CHROMIUM


@pytest.fixture(scope="module")
def cors_server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """gunicorn allowing one page origin (127.0.0.1 on a port reserved here for the allowed page)."""
    port, page_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("gunicorn-cors") / "server.log"
    proc = launch_gunicorn(gunicorn_env(docker_host, port, SERVICE_DATA_DIR=":memory:",
                                        SERVICE_CORS_ORIGINS=f"http://127.0.0.1:{page_port}"), log_path, base)
    yield base, page_port
    stop_gunicorn(proc, log_path)


def test_a_page_on_an_allowed_origin_reads_the_api_and_its_stream(chromium: str, cors_server: tuple[str, int],
                                                                  tmp_path: Path) -> None:
    base, page_port = cors_server
    with PageServer(base, page_port) as page:
        report = _browse(page, tmp_path)
    assert report.get("status") == 200, report
    assert isinstance(report.get("total"), int)
    assert report.get("etag"), report                       # exposed: the page can read it
    assert report.get("requestId") == "cors-probe-request-1", report   # the preflighted header went through
    assert report.get("stream") == "open", report


def test_a_page_on_another_origin_is_blocked_and_its_stream_refused(chromium: str, cors_server: tuple[str, int],
                                                                    tmp_path: Path) -> None:
    base, _ = cors_server
    with PageServer(base) as page:
        report = _browse(page, tmp_path)
        other = page.origin
    assert "fetchError" in report and "status" not in report, report   # the browser kept the answer from it
    assert report.get("stream") == "failed", report
    refused = requests.get(f"{base}/events", headers={"Origin": other, "Accept": "text/event-stream"}, timeout=5)
    assert refused.status_code == 403 and refused.json()["code"] == "SSE003"
    assert "Access-Control-Allow-Origin" not in refused.headers
    preflight = requests.options(f"{base}/services", headers={"Origin": other,
                                                               "Access-Control-Request-Method": "GET"}, timeout=5)
    assert "Access-Control-Allow-Origin" not in preflight.headers


# --------------------------------------------------------------------------- behind nginx, across a restart
PROBE = """<!doctype html><meta charset="utf-8"><title>restart probe</title><script>
function report(kind, extra) {
  fetch("/report", {method: "POST", body: JSON.stringify({kind: kind, ...extra})});
}
const source = new EventSource("/events");
source.onopen = () => report("open", {});
source.onerror = () => report("error", {state: source.readyState});
for (const name of ["config", "batch", "sync"]) {
  source.addEventListener(name, event => report("event", {name: name, id: event.lastEventId}));
}
</script>"""

# The remedy of docs/streams.md: a stream request that finds the upstream down gets an empty 200 event
# stream with a short retry, which EventSource treats as a dropped connection (it reconnects), not the 502
# it treats as final. Everything else still gets the 502.
REMEDY = """
  map $http_accept $shoal_wants_stream { default 0; "~*text/event-stream" 1; }
  server {
    listen 127.0.0.1:%(port)d;
    location = /probe.html { root %(prefix)s; }
    location = /report { proxy_pass %(page)s; }
    location / {
      proxy_pass %(upstream)s;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_set_header Host $http_host;
      error_page 502 504 = @shoal_down;
    }
    location @shoal_down {
      default_type text/event-stream;
      if ($shoal_wants_stream) { return 200 "retry: 1000\\n\\n"; }
      return 502;
    }
  }
"""


def _start_remedy_nginx(prefix: Path, upstream: str, page: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        pytest.fail("nginx not found: run scripts/setup (it installs the Debian package)", pytrace=False)
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "probe.html").write_text(PROBE)
    port = free_port()
    temp = "".join(f"  {name}_temp_path {prefix / name};\n" for name in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))
    conf = prefix / "nginx.conf"
    conf.write_text("daemon off;\nmaster_process off;\nworker_processes 1;\n"
                    f"pid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} info;\n"
                    "events { worker_connections 64; }\n"
                    f"http {{\n  access_log {prefix / 'access.log'};\n{temp}"
                    + REMEDY % {"port": port, "prefix": prefix, "page": page, "upstream": upstream} + "}\n")
    command = [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=20)
    assert checked.returncode == 0, f"nginx -t refused the remedy:\n{checked.stderr}"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: requests.get(url + "/probe.html", timeout=2).status_code == 200, 15, interval=0.1,
             message="nginx listening")
    return process, url


def test_behind_nginx_an_eventsource_reconnects_across_a_restart(chromium: str, docker_host: str, engine: Any,
                                                                tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path / "state"))
    proc = launch_gunicorn(env, tmp_path / "first.log", base)
    with PageServer(base) as page:
        nginx, url = _start_remedy_nginx(tmp_path / "nginx", base, page.origin)
        profile = tmp_path / "profile-restart"
        browser = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", url + "/probe.html"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config_id = None
        try:
            wait_for(lambda: any(r["kind"] == "open" for r in page.reports), 45, message="the first stream")
            stop_gunicorn(proc, tmp_path / "first.log")
            wait_for(lambda: any(r["kind"] == "error" for r in page.reports), 20, message="the stream to drop")
            down = requests.get(url + "/events", headers={"Accept": "text/event-stream"}, timeout=5)
            assert down.status_code == 200 and down.text == "retry: 1000\n\n"       # the remedy answers
            assert requests.get(url + "/services", timeout=5).status_code == 502  # JSON still sees the 502
            opens_while_down = sum(r["kind"] == "open" for r in page.reports)
            wait_for(lambda: sum(r["kind"] == "open" for r in page.reports) > opens_while_down + 1, 20,
                     message="EventSource retrying through the outage")
            proc = launch_gunicorn(env, tmp_path / "second.log", base)
            mark = len(page.reports)
            config_id = engine.create_config(f"cors-restart-probe-{port}", b"x")["ID"]
            wait_for(lambda: any(r["kind"] == "event" for r in page.reports[mark:]), 30,
                     message="an event from the restarted service in the page")
            assert not [r for r in page.reports if r["kind"] == "error" and r.get("state") == 2], \
                "EventSource gave up (readyState CLOSED)"
            stop_gunicorn(proc, tmp_path / "second.log")
        finally:
            browser.terminate()
            browser.wait(10)
            nginx.send_signal(3)
            nginx.wait(10)
            if config_id:
                engine.remove_config(config_id)
            if proc.poll() is None:   # a failure above left a server running
                proc.kill()
                proc.wait(10)
