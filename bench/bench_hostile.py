"""Hostile clients and a hung engine, before/after figures (docs/resilience.md; a real gunicorn on the lab engine).

    scripts/lab-pytest sb --co -q >/dev/null   # (starts the lab; or use any lab's DOCKER_HOST)
    SHOAL_LAB_DIR=/tmp/shoal-lab-sb SHOAL_LAB_NAME=sb \\
      DOCKER_HOST=unix:///tmp/shoal-lab-sb/sb/n1/docker.sock \\
      .venv/bin/python bench/bench_hostile.py [--repo DIR] [--label NAME] [--half-open 2500] [--readers 128]

gunicorn runs this checkout's ``gunicorn.conf.py`` (or ``--repo``'s: e.g. ``git archive <commit> | tar -x -C
/tmp/before``, with this checkout's virtualenv) on a free 127.0.0.1 port, following the lab engine:

- ``half-open``: ``--half-open`` connections each send an unfinished request head and then nothing; a new
  client's ``GET /-/health`` is timed from connect to the last byte (3 rounds, fresh connections each);
- ``readers``: a throw-away service writes 1 MB lines at ~20 MB/s (json-file without rotation: a rotating
  file throttles its followers); ``--readers`` clients open its live log tail from 60 s back and never
  read (4 KiB receive buffers); the worker's RSS is sampled for ``--seconds``; the service is removed;
- ``hung``: the lab's dockerd is frozen (SIGSTOP, SIGCONT in ``finally``); time until ``/-/ready`` is 503.

Results: printed, and merged into ``bench/results/hostile.json`` under ``--label``. Everything is bounded
in count and time; only 127.0.0.1 and the lab engine are contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"
# 1 MB lines, about 20 MB/s (a 30 s run leaves ~600 MB of log, removed with the service)
LOUD = "while true; do head -c 1000000 /dev/zero | tr '\\0' x; echo; sleep 0.05; done"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(port: int, path: str, timeout: float = 10.0) -> tuple[int, float]:
    """(status, seconds from connect to the end of the answer) of one ``GET`` on a fresh connection."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), time.monotonic() - started


def start_server(repo: Path, docker_host: str, directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", "SERVICE_DATA_DIR": str(directory / "state"), "PYTHONPATH": str(repo)}
    env.pop("SERVICE_CONFIG", None)
    log = (directory / "server.log").open("w")
    proc = subprocess.Popen([str(PYTHON), "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"], cwd=repo,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if http_status(port, "/-/ready", 2)[0] == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"gunicorn did not become ready: {(directory / 'server.log').read_text()[-2000:]}")


def worker_rss_mib(master: int) -> float:
    child = Path(f"/proc/{master}/task/{master}/children").read_text().split()[0]
    for line in Path(f"/proc/{child}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def half_open(port: int, count: int) -> dict[str, Any]:
    waits = []
    for _ in range(3):
        idle = []
        try:
            for _ in range(count):
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                sock.sendall(b"GET /-/health HTTP/1.1\r\nHost: x\r\n")   # never finished
                idle.append(sock)
            waits.append(http_status(port, "/-/health", 30)[1])
        finally:
            for sock in idle:
                sock.close()
        time.sleep(6)   # the server lets go of the closed ones (keep-alive timeout)
    return {"connections": count, "new_client_s": [round(w, 3) for w in waits], "max_s": round(max(waits), 3)}


def readers(port: int, master: int, docker_host: str, count: int, seconds: float) -> dict[str, Any]:
    import docker

    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    service = client.services.create(
        "local/busybox:latest", ["sh", "-c", LOUD], name=f"bench-loud-{uuid.uuid4().hex[:6]}", init=True,
        labels={"shoal.test": "1"}, endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"),
        log_driver="json-file")
    stalled: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while not any(t["Status"]["State"] == "running" for t in service.tasks()) and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(5)    # a backlog of lines to replay
        before = worker_rss_mib(master)
        for _ in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(f"GET /services/{service.id}/logs?since=60s HTTP/1.1\r\nHost: x\r\n"
                         "Accept: text/event-stream\r\n\r\n".encode())
            stalled.append(sock)
        peak, health = before, []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(1)
            peak = max(peak, worker_rss_mib(master))
            health.append(http_status(port, "/-/health", 30)[1])
        return {"readers": count, "seconds": seconds, "rss_before_mib": round(before), "rss_peak_mib": round(peak),
                "growth_mib": round(peak - before), "health_max_ms": round(max(health) * 1000)}
    finally:
        for sock in stalled:
            sock.close()
        service.remove()


def hung(port: int) -> dict[str, Any]:
    pid = int((Path(os.environ["SHOAL_LAB_DIR"]) / os.environ["SHOAL_LAB_NAME"] / "n1" / "dockerd.pid").read_text())
    time.sleep(2)
    os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        while time.monotonic() - frozen < 30 and http_status(port, "/-/ready", 5)[0] == 200:
            time.sleep(0.05)
        detected = time.monotonic() - frozen
    finally:
        os.kill(pid, signal.SIGCONT)
    thawed = time.monotonic()
    while time.monotonic() - thawed < 60 and http_status(port, "/-/ready", 5)[0] != 200:
        time.sleep(0.1)
    return {"stale_after_s": round(detected, 2), "live_again_after_s": round(time.monotonic() - thawed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--label", default="current")
    parser.add_argument("--half-open", type=int, default=2500)
    parser.add_argument("--readers", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--only", choices=("half-open", "readers", "hung"), action="append")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "hostile.json")
    args = parser.parse_args()
    docker_host = os.environ["DOCKER_HOST"]
    assert min(args.half_open, 5000) == args.half_open and args.readers <= 256, "bounded loads only"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        proc, port = start_server(args.repo.resolve(), docker_host, Path(tmp))
        try:
            wanted = args.only or ["half-open", "readers", "hung"]
            if "half-open" in wanted:
                results["half_open"] = half_open(port, args.half_open)
                print("half-open:", results["half_open"], flush=True)
            if "readers" in wanted:
                results["readers"] = readers(port, proc.pid, docker_host, args.readers, args.seconds)
                print("readers:", results["readers"], flush=True)
            if "hung" in wanted:
                results["hung"] = hung(port)
                print("hung:", results["hung"], flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    existing = json.loads(args.out.read_text()) if args.out.exists() else {}
    existing[args.label] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "repo": str(args.repo),
                            **results}
    args.out.write_text(json.dumps(existing, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
