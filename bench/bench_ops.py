"""Figures of the "operate the cluster" features (docs/figures.md) against the real lab engine, through a
real gunicorn.

    .venv/bin/python bench/bench_ops.py [--quick] [--docker-host unix:///tmp/shoal-lab/shoal/n1/docker.sock]

One gunicorn (the gevent worker, ``gunicorn.conf.py``) on 127.0.0.1 at operations level 3, its state store in
a temporary directory, proxying to a Prometheus this script starts on 127.0.0.1 (scraping only itself). Rows
report n, p50, p99 (nearest rank) and max in ms, client side (``requests`` keep-alive sessions):

1. writes on a sleeper service the bench creates (``b-ops-<pid>``, busybox ``sleep``, init, no registry
   lookup, removed at the end even on failure): scale 1/2 (full answer, ``Prefer: return=minimal``, and with
   a fresh ``Idempotency-Key``; then the same key replayed),
   env merge patch (a rolling update: answer time only), service labels PUT, pre-engine refusals (412 for an
   ``If-Match`` mismatch, 404 for a missing service), restart with ``Prefer: wait=60`` (time to a settled
   rollout), and rounds of env patch + scale + labels back to back while rollouts run (the engine bumps the
   version on its own then). Every 409 is counted (target: none, since the writes are sequential);
2. ``GET /services/{id}`` back to back from a second client while the writes run (writes must not hold the
   hub);
3. logs of the lab's ``demo_ticker`` (a stdout and a stderr line per second): live-tail latency (receive
   time minus the line's engine timestamp, same clock), JSON pages of 500 and 5,000 lines, 128 tails opened
   at once (time until all answered) and ``/-/health`` while they are open;
4. ``/metrics?query=up`` through the proxy vs Prometheus directly, and a 1 h range query at step 15;
5. ``/topology`` and ``/cluster``.

Results go to ``bench/results/ops.json`` and a Markdown table is printed. Every loop has a count and a time
limit; only 127.0.0.1 and the lab's unix socket are contacted.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import http.client
import json
import os
import platform
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench`

import docker
import requests

from bench.localhttp import free_port
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "ops.json"
DEFAULT_LAB_HOST = "unix:///tmp/shoal-lab/shoal/n1/docker.sock"
TICKER = "demo_ticker"
PREFIX = "b-ops-"
BENCH_LABEL = "shoal.bench"
IMAGE = "local/busybox:latest"
START_TIMEOUT = 60.0      # gunicorn until /-/ready (first full sync), Prometheus until up == 1
STOP_TIMEOUT = 20.0
SETTLE_TIMEOUT = 60.0     # the sleeper's tasks running / its rollout completed
PHASE_SECONDS = 40.0      # the time limit of one timed loop (it then stops early, with fewer samples)
TAILS = 128               # the log stream cap (LOG001 beyond it)
MERGE_PATCH = "application/merge-patch+json"
Engine = Any             # docker.APIClient: its methods carry no annotations


# ---------------------------------------------------------------- plan and results
@dataclass(frozen=True, slots=True)
class Plan:
    """Sample counts per row; ``--quick`` is a smoke run."""

    writes: int = 30          # scale (each variant), labels
    env_patches: int = 10
    mixed: int = 10           # rounds of env patch + scale + labels, back to back
    refusals: int = 100       # 412 and 404 each
    restarts: int = 5
    tail_lines: int = 30
    pages: int = 10           # each JSON page size
    health: int = 200
    metrics: int = 50
    cluster_reads: int = 50

    @classmethod
    def quick(cls) -> Plan:
        return cls(writes=6, env_patches=3, mixed=3, refusals=20, restarts=2, tail_lines=6, pages=3, health=30,
                   metrics=10, cluster_reads=10)


@dataclass(slots=True)
class Row:
    section: str
    name: str
    samples: list[float] = field(default_factory=list)   # seconds
    statuses: Counter[int] = field(default_factory=Counter)
    note: str = ""

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {"section": self.section, "name": self.name, "n": len(self.samples),
                                "statuses": {str(k): v for k, v in sorted(self.statuses.items())}}
        if self.samples:
            data.update(p50_ms=_ms(percentile(self.samples, 50)), p99_ms=_ms(percentile(self.samples, 99)),
                        max_ms=_ms(max(self.samples)))
        if self.note:
            data["note"] = self.note
        return data


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        _progress(row)
        return row


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _progress(row: Row) -> None:
    s = row.summary()
    print(f"  {row.section:<8} {row.name:<48} n={s['n']:<4} p50 {s.get('p50_ms', '-')} p99 {s.get('p99_ms', '-')} "
          f"max {s.get('max_ms', '-')} ms  {s['statuses']} {row.note}", file=sys.stderr, flush=True)


def timed_loop(count: int, call: Callable[[int], int], row: Row, seconds: float = PHASE_SECONDS) -> Row:
    """``count`` sequential calls (``call(i)`` returns the HTTP status), stopping early after ``seconds``."""
    deadline = time.monotonic() + seconds
    for index in range(count):
        started = time.perf_counter()
        status = call(index)
        row.samples.append(time.perf_counter() - started)
        row.statuses[status] += 1
        if time.monotonic() > deadline:
            row.note += f" (time limit: {index + 1}/{count})"
            break
    return row


def session() -> requests.Session:
    http = requests.Session()
    http.trust_env = False   # never route 127.0.0.1 through a proxy from the environment
    return http


# ---------------------------------------------------------------- processes
def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL to the process group this script created, each with a bounded wait."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


def _wait(condition: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen[bytes] | None = None,
          log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise SystemExit(f"{what}: the process exited with {process.returncode}\n{tail}")
        with contextlib.suppress(requests.RequestException, OSError, docker.errors.APIError):
            if condition():
                return
        time.sleep(0.2)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def prometheus_server(work: Path) -> Iterator[str]:
    """Prometheus on 127.0.0.1 at a free port, 1 s scrapes of itself only, storage in ``work``.

    (``tests/prometheus.py`` is a pytest fixture that also needs the lab's metrics address and a node
    exporter; the bench needs neither, and keeps its traffic on 127.0.0.1.)"""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus not found: run scripts/setup (it installs the Debian package)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                      f"  - job_name: prometheus\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    log = work / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h",
                                    "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with session() as http:
            _wait(lambda: http.get(f"{url}/-/ready", timeout=2).status_code == 200, START_TIMEOUT,
                  "prometheus /-/ready", process, log)
            _wait(lambda: bool(http.get(f"{url}/api/v1/query", params={"query": "up == 1"}, timeout=2)
                               .json()["data"]["result"]), START_TIMEOUT, "prometheus scraping itself", process, log)
        yield url
    finally:
        _stop(process)


@contextlib.contextmanager
def gunicorn_server(docker_host: str, prometheus_url: str, work: Path, report: Report) -> Iterator[str]:
    """The production server (gevent worker) at level 3 on a free 127.0.0.1 port; stopped at the end, its log
    checked for tracebacks."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data_dir = work / "state"
    data_dir.mkdir()
    env = {**os.environ, "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", "SERVICE_OPERATIONS_LEVEL": "3", "SERVICE_DATA_DIR": str(data_dir),
           "SERVICE_PROMETHEUS_URL": prometheus_url}
    env.pop("SERVICE_CONFIG", None)
    log = work / "gunicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(ROOT / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.monotonic()
        with session() as http:
            _wait(lambda: http.get(f"{base}/-/ready", timeout=2).status_code == 200, START_TIMEOUT,
                  "gunicorn /-/ready", process, log)
        report.details["gunicorn_ready_s"] = round(time.monotonic() - started, 2)
        yield base
    finally:
        _stop(process)
        text = log.read_text(errors="replace")
        report.details["gunicorn_exit"] = process.returncode
        if "Traceback" in text:
            report.notes.append("gunicorn log has a traceback (see details.gunicorn_log_tail)")
            report.details["gunicorn_log_tail"] = text[-4000:]


# ---------------------------------------------------------------- the sleeper service
def remove_leftovers(engine: Engine) -> None:
    """Services of an earlier run killed before its own cleanup."""
    for service in engine.services(filters={"label": f"{BENCH_LABEL}=ops"}):
        if str(service["Spec"]["Name"]).startswith(PREFIX):
            engine.remove_service(service["ID"])


@contextlib.contextmanager
def sleeper(engine: Engine) -> Iterator[str]:
    """A one-replica ``sleep`` service (init, stop grace 1 s, no registry lookup: the API never resolves
    images, only the CLI does); always removed. The update policy is the engine's default (one task at a
    time, stop-first, 5 s monitor): the monitor period is most of a restart's settle time."""
    name = f"{PREFIX}{os.getpid()}"
    template = docker.types.TaskTemplate(
        docker.types.ContainerSpec(IMAGE, command=["sleep", "1000000"], init=True, stop_grace_period=1_000_000_000))
    created = engine.create_service(template, name=name, labels={BENCH_LABEL: "ops"},
                                    mode=docker.types.ServiceMode("replicated", replicas=1))
    service_id = str(created["ID"])
    try:
        _wait(lambda: running_tasks(engine, service_id) >= 1, SETTLE_TIMEOUT, f"{name} running")
        yield service_id
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            engine.remove_service(service_id)


def running_tasks(engine: Engine, service_id: str) -> int:
    return sum(1 for t in engine.tasks(filters={"service": service_id, "desired-state": "running"})
               if t["Status"]["State"] == "running")


def rollout_settled(engine: Engine, service_id: str) -> bool:
    status = engine.inspect_service(service_id).get("UpdateStatus") or {}
    return status.get("State") in (None, "completed", "paused", "rollback_completed", "rollback_paused")


def service_id_named(engine: Engine, name: str) -> str:
    matches = [s for s in engine.services(filters={"name": name}) if s["Spec"]["Name"] == name]
    if not matches:
        raise SystemExit(f"the lab has no service {name} (scripts/lab-swarm up deploys it)")
    return str(matches[0]["ID"])


# ---------------------------------------------------------------- 1 + 2. writes, reads during writes
class Reader(threading.Thread):
    """Back-to-back ``GET /services/{id}`` on its own keep-alive connection until stopped (count and time
    bounded too)."""

    def __init__(self, url: str, limit: int = 100_000, seconds: float = 240.0) -> None:
        super().__init__(daemon=True)
        self.url, self.limit, self.seconds = url, limit, seconds
        self.row = Row("reads", "GET /services/{id} during the writes")
        self.stopping = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.seconds
        with session() as http:
            while not self.stopping.is_set() and len(self.row.samples) < self.limit and time.monotonic() < deadline:
                started = time.perf_counter()
                status = http.get(self.url, headers={"Accept": "application/json"}, timeout=30).status_code
                self.row.samples.append(time.perf_counter() - started)
                self.row.statuses[status] += 1

    def stop(self) -> Row:
        self.stopping.set()
        self.join(timeout=35)
        return self.row


def bench_writes(plan: Plan, base: str, engine: Engine, service_id: str, report: Report) -> None:
    url = f"{base}/services/{service_id}"
    with session() as http:   # the baseline: the same read with no write running
        report.add(timed_loop(plan.health, lambda i: http.get(url, headers={"Accept": "application/json"},
                                                              timeout=30).status_code,
                              Row("reads", "GET /services/{id}, no write running")))
    reader = Reader(url)
    reader.start()
    try:
        with session() as http:
            _writes(plan, http, url, base, engine, service_id, report)
    finally:
        report.add(reader.stop())


def _writes(plan: Plan, http: requests.Session, url: str, base: str, engine: Engine, service_id: str,
            report: Report) -> None:
    json_headers = {"Accept": "application/json"}
    minimal = {**json_headers, "Prefer": "return=minimal"}

    # full and minimal answers interleaved (full, minimal, minimal, full, ...: each variant scales up and down
    # equally often), so that neither row gets a quieter moment of the engine
    # (a third variant: a fresh Idempotency-Key each time, i.e. two durable commits in the state store)
    rows = (Row("writes", "PUT /scale (full answer)"), Row("writes", "PUT /scale (return=minimal)"),
            Row("writes", "PUT /scale (full answer, fresh Idempotency-Key)"))
    deadline = time.monotonic() + PHASE_SECONDS
    for index in range(3 * plan.writes):
        row, headers = ((rows[0], json_headers), (rows[1], minimal),
                        (rows[2], {**json_headers, "Idempotency-Key": f'"bench-{os.getpid()}-{index}"'}))[index % 3]
        started = time.perf_counter()
        status = http.put(f"{url}/scale", json={"replicas": 2 if index % 2 == 0 else 1}, headers=headers,
                          timeout=30).status_code
        row.samples.append(time.perf_counter() - started)
        row.statuses[status] += 1
        if time.monotonic() > deadline:
            break
    for row in rows:
        report.add(row)
    replayed = {**json_headers, "Idempotency-Key": f'"bench-{os.getpid()}-2"'}   # index 2: scaled to 2
    report.add(timed_loop(plan.writes, lambda i: http.put(
        f"{url}/scale", json={"replicas": 2}, headers=replayed, timeout=30).status_code,
        Row("writes", "PUT /scale replayed (same Idempotency-Key)", note="no engine call")))
    report.add(timed_loop(plan.writes, lambda i: http.put(
        f"{url}/labels", json={BENCH_LABEL: "ops", "bench.n": str(i)}, headers=json_headers, timeout=30).status_code,
        Row("writes", "PUT /labels (service labels)")))
    report.add(timed_loop(plan.env_patches, lambda i: http.patch(
        f"{url}/env", data=json.dumps({"BENCH_N": str(i)}), timeout=30,
        headers={**json_headers, "Content-Type": MERGE_PATCH}).status_code,
        Row("writes", "PATCH /env merge patch (answer only)", note="rolling update each")))
    mixed = Row("writes", "env patch, scale, labels back to back", note="rollouts in progress")

    def mixed_round(index: int) -> None:   # three writes; the row keeps each one's time
        calls: tuple[Callable[[], requests.Response], ...] = (
            lambda: http.patch(f"{url}/env", data=json.dumps({"BENCH_M": str(index)}), timeout=30,
                               headers={**json_headers, "Content-Type": MERGE_PATCH}),
            lambda: http.put(f"{url}/scale", json={"replicas": 2 if index % 2 == 0 else 1}, headers=json_headers,
                             timeout=30),
            lambda: http.put(f"{url}/labels", json={BENCH_LABEL: "ops", "bench.m": str(index)},
                             headers=json_headers, timeout=30))
        for call in calls:
            started = time.perf_counter()
            status = call().status_code
            mixed.samples.append(time.perf_counter() - started)
            mixed.statuses[status] += 1

    deadline = time.monotonic() + PHASE_SECONDS
    for index in range(plan.mixed):
        mixed_round(index)
        if time.monotonic() > deadline:
            break
    report.add(mixed)
    report.add(timed_loop(plan.refusals, lambda i: http.put(
        f"{url}/scale", json={"replicas": 1}, timeout=30,
        headers={**json_headers, "If-Match": '"not-the-etag"'}).status_code,
        Row("writes", "refused: If-Match mismatch (412)")))
    report.add(timed_loop(plan.refusals, lambda i: http.put(
        f"{base}/services/no-such-service-{i}/scale", json={"replicas": 1}, headers=json_headers,
        timeout=30).status_code, Row("writes", "refused: missing service (404)")))
    # a clean start for the restarts: the env patches' rollout done
    _wait(lambda: rollout_settled(engine, service_id), SETTLE_TIMEOUT, "the env rollout to settle")
    settled: list[Any] = []

    def restart(index: int) -> int:
        response = http.post(f"{url}/restart", headers={**json_headers, "Prefer": "wait=60"}, timeout=90)
        if response.status_code == 200:
            settled.append((response.json().get("rollout") or {}).get("state"))
        return response.status_code

    report.add(timed_loop(plan.restarts, restart, Row("writes", "POST /restart, Prefer: wait=60 (settled)"),
                          seconds=120))
    report.rows[-1].note = (f"rollout states {dict(Counter(map(str, settled)))}, "
                            f"replicas {running_tasks(engine, service_id)}")
    conflicts = sum(row.statuses.get(409, 0) for row in report.rows if row.section == "writes")
    report.details["write_409s"] = conflicts


# ---------------------------------------------------------------- 3. logs
def _epoch(timestamp: str) -> float:
    """RFC 3339 UTC with up to 9 fractional digits → seconds since the epoch (float; µs precision is enough)."""
    whole, _, rest = timestamp.rstrip("Z").partition(".")
    seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return seconds + (float(f"0.{rest}") if rest else 0.0)


def live_tail(port: int, path: str, lines: int, seconds: float) -> tuple[list[float], int]:
    """Follow ``path`` as SSE; for each line, receive time minus its own timestamp. Returns (latencies,
    status)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=seconds)
    latencies: list[float] = []
    try:
        connection.request("GET", path, headers={"Accept": "text/event-stream"})
        response = connection.getresponse()
        if response.status != 200:
            return latencies, response.status
        buffer = b""
        deadline = time.monotonic() + seconds
        while len(latencies) < lines and time.monotonic() < deadline:
            chunk = response.read1(65536)
            received = time.time()
            if not chunk:
                break
            buffer += chunk
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        latencies.append(received - _epoch(json.loads(line[6:])["timestamp"]))
        return latencies, 200
    finally:
        connection.close()


def open_tails(port: int, path: str, count: int, seconds: float) -> tuple[list[socket.socket], Counter[int], float]:
    """``count`` SSE requests sent at once on new connections; returns the sockets, their statuses and the
    time until the last status line arrived."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    sockets: list[socket.socket] = []
    heads: dict[int, bytes] = {}
    statuses: Counter[int] = Counter()
    started = time.perf_counter()
    deadline = time.monotonic() + seconds
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(request)
            sock.setblocking(False)
            sockets.append(sock)
            heads[sock.fileno()] = b""
            selector.register(sock, selectors.EVENT_READ)
        pending = count
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                if not isinstance(key.fileobj, socket.socket):
                    continue
                sock = key.fileobj
                chunk = sock.recv(65536)
                heads[sock.fileno()] += chunk
                head = heads[sock.fileno()]
                if b"\r\n" in head or not chunk:
                    selector.unregister(sock)
                    pending -= 1
                    statuses[int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0] += 1
        elapsed = time.perf_counter() - started
        statuses[-1] += pending   # never answered within the time limit
        if not statuses[-1]:
            del statuses[-1]
        return sockets, statuses, elapsed
    finally:
        selector.close()


def bench_logs(plan: Plan, base: str, ticker: str, report: Report) -> None:
    port = int(base.rsplit(":", 1)[1])
    path = f"/services/{ticker}/logs"
    seconds = plan.tail_lines / 2 + 15      # the ticker writes two lines a second
    latencies, status = live_tail(port, path, plan.tail_lines, seconds)
    report.add(Row("logs", f"live tail: receive - line timestamp ({TICKER})", latencies, Counter({status: 1})))
    with session() as http:
        for limit in (500, 5000):
            sizes: list[int] = []

            def page(index: int, limit: int = limit, sizes: list[int] = sizes) -> int:
                response = http.get(f"{base}{path}", params={"limit": str(limit)},
                                    headers={"Accept": "application/json"}, timeout=30)
                if response.status_code == 200:
                    sizes.append(len(response.json()["lines"]))
                return response.status_code

            row = timed_loop(plan.pages, page, Row("logs", f"JSON page ?limit={limit}"))
            row.note = f"lines {min(sizes, default=0)}..{max(sizes, default=0)}"
            report.add(row)
        report.add(timed_loop(plan.health, lambda i: http.get(f"{base}/-/health", timeout=10).status_code,
                              Row("logs", "GET /-/health, no tail open")))
        time.sleep(1.5)   # the live tail's slot is freed within the 1 s liveness interval
        sockets, statuses, elapsed = open_tails(port, path, TAILS, 60)
        try:
            report.add(Row("logs", f"open {TAILS} tails at once (time to all answered)", [elapsed], statuses))
            report.add(timed_loop(plan.health, lambda i: http.get(f"{base}/-/health", timeout=10).status_code,
                                  Row("logs", f"GET /-/health while {TAILS} tails are open")))
        finally:
            for sock in sockets:
                sock.close()


# ---------------------------------------------------------------- 4. metrics
def bench_metrics(plan: Plan, base: str, prometheus: str, report: Report) -> None:
    with session() as http:
        def get(url: str, params: dict[str, str] | Callable[[], dict[str, str]]) -> Callable[[int], int]:
            def call(index: int) -> int:
                values = params() if callable(params) else params
                return http.get(url, params=values, headers={"Accept": "application/json"}, timeout=30).status_code
            return call

        def hour() -> dict[str, str]:
            end = time.time()
            return {"query": "up", "start": f"{end - 3600:.3f}", "end": f"{end:.3f}", "step": "15"}

        for name, url, params in (
                ("GET /metrics?query=up (proxy)", f"{base}/metrics", {"query": "up"}),
                ("GET /api/v1/query?query=up (Prometheus directly)", f"{prometheus}/api/v1/query", {"query": "up"}),
                ("GET /metrics range 1 h step 15 (proxy)", f"{base}/metrics", hour),
                ("GET /api/v1/query_range 1 h step 15 (directly)", f"{prometheus}/api/v1/query_range", hour)):
            report.add(timed_loop(plan.metrics, get(url, params), Row("metrics", name)))


# ---------------------------------------------------------------- 5. cluster
def bench_cluster(plan: Plan, base: str, report: Report) -> None:
    with session() as http:
        for path in ("/topology", "/cluster"):
            sizes: list[int] = []

            def call(index: int, path: str = path, sizes: list[int] = sizes) -> int:
                response = http.get(f"{base}{path}", headers={"Accept": "application/json"}, timeout=30)
                sizes.append(len(response.content))
                return response.status_code

            row = timed_loop(plan.cluster_reads, call, Row("cluster", f"GET {path}"))
            row.note = f"{max(sizes, default=0)} bytes"
            report.add(row)


# ---------------------------------------------------------------- output
def markdown(report: Report) -> str:
    lines = ["| Section | Measurement | n | p50 ms | p99 ms | max ms | statuses | note |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for row in report.rows:
        s = row.summary()
        statuses = ", ".join(f"{k}: {v}" for k, v in s["statuses"].items())
        lines.append(f"| {row.section} | {row.name} | {s['n']} | {s.get('p50_ms', '—')} | {s.get('p99_ms', '—')} | "
                     f"{s.get('max_ms', '—')} | {statuses} | {row.note.strip()} |")
    return "\n".join(lines + [""] + [f"_{note}_" for note in report.notes])


def environment() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False, timeout=10).stdout.strip()
    return {"generated_at": datetime.now(UTC).isoformat(timespec="seconds"), "git_commit": commit,
            "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}


def write_json(report: Report, plan: Plan, load: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {**environment(), **load, "plan": {k: getattr(plan, k) for k in plan.__dataclass_fields__},
                "rows": [row.summary() for row in report.rows], "notes": report.notes, **report.details}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")


# ---------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Operating figures: writes, logs, metrics proxy, cluster reads.")
    parser.add_argument("--quick", action="store_true", help="few samples per row (smoke run)")
    parser.add_argument("--docker-host", default=os.environ.get("DOCKER_HOST") or DEFAULT_LAB_HOST,
                        help="the lab engine (a unix socket; default $DOCKER_HOST, else the lab's)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.docker_host.startswith("unix://"):
        raise SystemExit(f"{args.docker_host}: only a local unix socket engine is benchmarked")
    plan, report = (Plan.quick() if args.quick else Plan()), Report()
    load = {"load_average_before": os.getloadavg()}
    started = time.monotonic()
    engine: Engine = docker.APIClient(base_url=args.docker_host, version="1.41", timeout=30)
    try:
        remove_leftovers(engine)
        ticker = service_id_named(engine, TICKER)
        with tempfile.TemporaryDirectory(prefix="bench-ops-") as temp:
            work = Path(temp)
            (work / "prom").mkdir()
            with prometheus_server(work / "prom") as prometheus, \
                    gunicorn_server(args.docker_host, prometheus, work, report) as base:
                with sleeper(engine) as service_id:
                    bench_writes(plan, base, engine, service_id, report)
                bench_logs(plan, base, ticker, report)
                bench_metrics(plan, base, prometheus, report)
                bench_cluster(plan, base, report)
    finally:
        engine.close()
    load["load_average_after"] = os.getloadavg()
    report.details["duration_s"] = round(time.monotonic() - started, 1)
    write_json(report, plan, load)
    print(markdown(report))
    print(f"\n{report.details.get('write_409s', 0)} x 409 among the writes; load average before "
          f"{load['load_average_before']}, after {load['load_average_after']}; {report.details['duration_s']} s")


if __name__ == "__main__":
    main()
