"""What the state store's live tests share: a gunicorn server on a state directory that can be started again
on the same port, killed (worker, master) or stopped; an independent SSE client (httpx-sse) on ``/events``;
``/history`` read whole; the store file read directly (what was committed)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import httpx
import pytest
from httpx_sse import connect_sse

from tests.conftest import OPENAPI, free_port, gunicorn_env, launch_gunicorn, wait_for


class Server:
    """gunicorn on 127.0.0.1 with a given state directory; startable again on the same port and directory."""

    def __init__(self, docker_host: str, state: Path, logs: Path) -> None:
        self.state = state
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = gunicorn_env(docker_host, self.port, SERVICE_DATA_DIR=str(state))
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        OPENAPI.bases.add(self.base)

    @property
    def log_path(self) -> Path:
        return self.logs / f"server-{self.runs}.log"

    def start(self) -> None:
        self.runs += 1
        self.proc = launch_gunicorn(self.env, self.log_path, self.base)

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("gunicorn did not stop within 20 s of SIGTERM", pytrace=False)
        self.proc = None
        text = self.log_path.read_text()
        assert code == 0, text[-4000:]
        assert "Traceback" not in text, text[-4000:]

    def workers(self) -> list[int]:
        assert self.proc is not None
        return children(self.proc.pid)

    def kill_worker(self) -> int:
        """SIGKILL the worker (no exit hook runs: a crash, an OOM kill); the master starts a new one."""
        workers = self.workers()
        assert len(workers) == 1, workers
        os.kill(workers[0], signal.SIGKILL)
        return workers[0]

    def kill_master(self) -> list[int]:
        """SIGKILL the master alone; its worker notices within a second and stops in order (its exit hook
        closes the store). Returns the orphaned worker pids, gone when this returns (bounded wait)."""
        assert self.proc is not None
        workers = self.workers()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None
        wait_for(lambda: not [pid for pid in workers if Path(f"/proc/{pid}").exists()
                              and "Z" not in _state_of(pid)], 30, message="the orphaned worker ended")
        return workers

    def kill_all(self) -> None:
        """SIGKILL the worker and the master: nothing runs an exit hook."""
        assert self.proc is not None
        for pid in self.workers():
            os.kill(pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def ready(self) -> dict[str, Any]:
        answer = httpx.get(f"{self.base}/-/ready", timeout=5)
        document: dict[str, Any] = answer.json()
        document["httpStatus"] = answer.status_code
        return document

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records


def server_fixture() -> Callable[..., Iterator[Server]]:
    """The ``server`` fixture of a store test module (``server = server_fixture()``): a :class:`Server` on a
    fresh state directory, stopped at the end if still running."""

    @pytest.fixture
    def server(docker_host: str, tmp_path: Path) -> Iterator[Server]:
        running = Server(docker_host, tmp_path / "state", tmp_path)
        yield running
        if running.proc is not None:
            running.stop()

    return server


class Stream:
    """An SSE connection to /events read by its own greenlet; ends when the server goes away."""

    def __init__(self, base: str, last_event_id: str | None = None) -> None:
        self.base = base
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.frames: list[tuple[str, str, Any]] = []    # (id, event name, data)
        self.status: int | None = None
        self.ended = False
        self._http = httpx.Client(base_url=base, timeout=httpx.Timeout(10, read=60))
        self._reader = gevent.spawn(self._read, headers)
        wait_for(lambda: self.status is not None, 5, message="the stream opened")
        assert self.status == 200

    def _read(self, headers: dict[str, str]) -> None:
        try:
            with connect_sse(self._http, "GET", "/events", headers=headers) as source:
                self.status = source.response.status_code
                for sse in source.iter_sse():
                    if sse.data:
                        self.frames.append((sse.id, sse.event, json.loads(sse.data)))
        except httpx.HTTPError:
            pass   # the server stopped under the stream: that is the point
        finally:
            self.ended = True

    def items(self) -> list[tuple[int, dict[str, Any]]]:
        """(frame id, item) of every change event, batches unpacked."""
        out = []
        for frame_id, name, data in list(self.frames):
            if name == "sync":
                continue
            for item in data if name == "batch" else [data]:
                out.append((int(frame_id), item))
        return out

    def has(self, action: str, object_id: str) -> bool:
        return any(item["action"] == action and item["id"] == object_id for _, item in self.items())

    def close(self) -> None:
        self._reader.kill(block=True, timeout=5)
        self._http.close()


def history_since(base: str, after: int) -> list[dict[str, Any]]:
    """Every /history entry newer than ``after``, oldest first, following ``next`` (bounded)."""
    entries: list[dict[str, Any]] = []
    url: str | None = f"{base}/history?limit=500&action=create,update,remove,ref_changed"   # every record
    for _ in range(100):
        if url is None:
            break
        page = httpx.get(url, headers={"Accept": "application/json"}, timeout=10).json()
        entries += [e for e in page["items"] if e["id"] > after]
        if page["items"] and page["items"][-1]["id"] <= after:
            break
        url = page.get("next")
        if url is not None and url.startswith("/"):
            url = base + url
    return sorted(entries, key=lambda e: e["id"])


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found



def _state_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def committed(state: Path) -> tuple[dict[int, tuple[str, str, str]], dict[str, str]]:
    """The history rows (seq → (kind, action, object id)) and the meta of the store file, read directly."""
    with sqlite3.connect(f"file:{state / 'shoal.db'}?mode=ro", uri=True, timeout=10) as db:
        rows = {int(seq): (kind, action, object_id)
                for seq, kind, action, object_id in db.execute("SELECT seq, kind, action, object_id FROM history")}
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    db.close()
    return rows, meta
