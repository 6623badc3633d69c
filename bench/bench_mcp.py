"""Figures of the agent endpoint (docs/figures.md) against the real lab engine, through a real gunicorn.

    .venv/bin/python bench/bench_mcp.py [--quick] [--docker-host unix:///tmp/shoal-lab/shoal/n1/docker.sock]

One gunicorn (the gevent worker, ``gunicorn.conf.py``) on 127.0.0.1 with ``SERVICE_MCP=true`` at operations
level 1, auth mode none, its state store in a temporary directory. Requests alternate between the MCP call
and the REST call with the same effect, so both see the same noise. Rows report n, p50, p99 (nearest rank)
and max in ms, client side (``requests`` keep-alive sessions; one handshake session, 2025-11-25; the
session cap raised to 1,024 for the idle row):

1. ``resources/read service://services/<id>`` vs ``GET /services/<id>`` (same representation);
2. ``tools/call scale_service`` vs ``PUT /services/<id>/scale`` on a sleeper service the bench creates
   (``b-mcp-<pid>``, removed at the end even on failure), replicas alternating 1/2;
3. 256 idle sessions (their connections closed after the handshake): the worker's RSS before and after
   opening them (``/proc/<pid>/status``), per session;
4. ``GET /-/health`` from a second client while the agent calls run: the tail shows whether agent work
   stalls the worker.

Results go to ``bench/results/mcp.json`` and a Markdown table is printed. Every loop has a count and a time
limit; only 127.0.0.1 and the lab's unix socket are contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench`

import docker
import requests

from bench.localhttp import free_port
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "mcp.json"
DEFAULT_LAB_HOST = "unix:///tmp/shoal-lab/shoal/n1/docker.sock"
IMAGE = "local/busybox:latest"
VERSION = "2025-11-25"
PHASE_SECONDS = 60.0
START_TIMEOUT = 90.0


def _row(name: str, samples: list[float], note: str = "") -> dict[str, Any]:
    ms = [s * 1000 for s in samples]
    return {"name": name, "n": len(ms), "p50": round(percentile(ms, 50), 2) if ms else None,
            "p99": round(percentile(ms, 99), 2) if ms else None, "max": round(max(ms), 2) if ms else None,
            "note": note}


class McpSession:
    """A handshake session over plain HTTP (the wire the official SDK client uses)."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/mcp"
        self.http = requests.Session()
        self.http.headers.update({"Accept": "application/json, text/event-stream",
                                  "Content-Type": "application/json"})
        self.next_id = 0
        answer = self.http.post(self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
            timeout=10)
        answer.raise_for_status()
        self.http.headers.update({"Mcp-Session-Id": answer.headers["Mcp-Session-Id"],
                                  "MCP-Protocol-Version": VERSION})
        self.http.post(self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=10)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        answer = self.http.post(self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                                "params": params}, timeout=30)
        body: dict[str, Any] = answer.json()
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body["result"]  # type: ignore[no-any-return]

    def park(self) -> None:
        """Close the connection, keep the session: an idle agent holds no socket."""
        self.http.close()

    def close(self) -> None:
        with contextlib.suppress(requests.RequestException):
            requests.delete(self.url, headers=dict(self.http.headers), timeout=5)
        self.http.close()


def _worker_rss_kb(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    total = 0
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


@contextlib.contextmanager
def gunicorn_server(docker_host: str, work: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", "SERVICE_OPERATIONS_LEVEL": "1", "SERVICE_MCP": "true",
           "SERVICE_DATA_DIR": str(work / "state"), "SERVICE_MCP_MAX_SESSIONS": "1024"}
    env.pop("SERVICE_CONFIG", None)
    log = work / "gunicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(ROOT / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base}/-/ready", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)   # polling the readiness of a process we started; bounded by START_TIMEOUT
        else:
            raise SystemExit(f"gunicorn not ready:\n{log.read_text()[-3000:]}")
        yield base, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def alternate(count: int, first: Callable[[int], None], second: Callable[[int], None]
              ) -> tuple[list[float], list[float]]:
    a: list[float] = []
    b: list[float] = []
    stop = time.monotonic() + PHASE_SECONDS
    for index in range(count):
        if time.monotonic() > stop:
            break
        for call, samples in ((first, a), (second, b)) if index % 2 == 0 else ((second, b), (first, a)):
            started = time.perf_counter()
            call(index)
            samples.append(time.perf_counter() - started)
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docker-host", default=os.environ.get("SHOAL_TEST_DOCKER_HOST", DEFAULT_LAB_HOST))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reads, writes, idle = (60, 10, 64) if args.quick else (600, 60, 256)
    engine = docker.DockerClient(base_url=args.docker_host)
    name = f"b-mcp-{os.getpid()}"
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    service = engine.services.create(IMAGE, ["sleep", "1000000"], name=name, init=True,
                                     mode=docker.types.ServiceMode("replicated", replicas=1),
                                     endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"))
    try:
        with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp, \
                gunicorn_server(args.docker_host, Path(tmp)) as (base, master):
            rest = requests.Session()
            deadline = time.monotonic() + 30
            while rest.get(f"{base}/services/{service.id}", timeout=5).status_code != 200:
                if time.monotonic() > deadline:
                    raise SystemExit("the bench service never reached the cache")
                time.sleep(0.1)   # the watcher's first sight of the new service; bounded
            agent = McpSession(base)
            health: list[float] = []
            done = threading.Event()

            def probe() -> None:
                http = requests.Session()
                while not done.is_set() and len(health) < 100_000:
                    started = time.perf_counter()
                    http.get(f"{base}/-/health", timeout=10)
                    health.append(time.perf_counter() - started)
                    done.wait(0.01)   # a probe every ~10 ms, not a wait for a condition

            prober = threading.Thread(target=probe, daemon=True)
            prober.start()
            uri = f"service://services/{service.id}"
            mcp_reads, rest_reads = alternate(
                reads, lambda _: agent.call("resources/read", {"uri": uri}),
                lambda _: rest.get(f"{base}/services/{service.id}", headers={"Accept": "application/json"},
                                   timeout=10).raise_for_status())
            rows += [_row("resources/read service", mcp_reads), _row("GET /services/{id}", rest_reads)]

            def tool_scale(index: int) -> None:
                result = agent.call("tools/call", {"name": "scale_service",
                                                   "arguments": {"id": service.id, "replicas": 1 + index % 2}})
                if result.get("isError"):
                    raise RuntimeError(result["content"][0]["text"])

            def rest_scale(index: int) -> None:
                rest.put(f"{base}/services/{service.id}/scale", json={"replicas": 1 + index % 2},
                         headers={"Accept": "application/json"}, timeout=30).raise_for_status()

            mcp_writes, rest_writes = alternate(writes, tool_scale, rest_scale)
            rows += [_row("tools/call scale_service", mcp_writes), _row("PUT /services/{id}/scale", rest_writes)]
            done.set()
            prober.join(timeout=15)
            rows.append(_row("GET /-/health during agent calls", health))

            before = _worker_rss_kb(master)
            sessions = [McpSession(base) for _ in range(idle)]
            for opened in sessions:
                opened.park()
            time.sleep(1.0)   # let the worker settle its allocations before measuring RSS (not a condition)
            after = _worker_rss_kb(master)
            details["idle_sessions"] = idle
            details["rss_before_kb"], details["rss_after_kb"] = before, after
            details["rss_per_session_kb"] = round((after - before) / idle, 2)
            for opened in sessions:
                opened.close()
            agent.close()
    finally:
        service.remove()
    report = {"rows": rows, "details": details, "quick": args.quick, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print("| row | n | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['name']} | {row['n']} | {row['p50']} | {row['p99']} | {row['max']} |")
    print(f"\nidle sessions: {details['idle_sessions']}, worker RSS {details['rss_before_kb']} → "
          f"{details['rss_after_kb']} KiB ({details['rss_per_session_kb']} KiB per session)")


if __name__ == "__main__":
    main()
