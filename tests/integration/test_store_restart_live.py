"""Surviving a restart (issue 9 §6) through the real server: gunicorn with a state directory on the lab
swarm, an independent SSE client (httpx-sse). With the client connected the service stops; a config is
created, a service updated twice, a secret removed and another config created and removed with the docker
SDK; the service starts again on the same state directory and the client reconnects with its
Last-Event-ID: it gets exactly the net changes made while the service was down (one create, one update,
one remove; nothing for the fleeting config; no ``sync``, no duplicate, no gap), and /history shows them
with no hole."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import gevent
import httpx
import pytest
from httpx_sse import connect_sse

from tests.conftest import OPENAPI, free_port, gunicorn_env, launch_gunicorn, wait_for
from tests.integration.engine_state import TEST_LABEL, sleeper

pytestmark = pytest.mark.integration


class Server:
    """gunicorn on 127.0.0.1 with a given state directory; startable again on the same port and directory."""

    def __init__(self, docker_host: str, state: Path, logs: Path) -> None:
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

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records


class Stream:
    """An SSE connection to /events read by its own greenlet; ends when the server goes away."""

    def __init__(self, base: str, last_event_id: str | None = None) -> None:
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
    url: str | None = f"{base}/history?limit=500"
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


@pytest.fixture
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture
def server(docker_host: str, tmp_path: Path) -> Iterator[Server]:
    running = Server(docker_host, tmp_path / "state", tmp_path)
    yield running
    if running.proc is not None:
        running.stop()


def test_a_client_reconnecting_after_a_restart_gets_exactly_what_it_missed(server: Server, dclient: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    labels = {TEST_LABEL: "1"}
    made: list[Any] = []
    try:
        server.start()
        stream = Stream(server.base)
        doomed = dclient.secrets.create(name=f"shoal-store-doomed-{tag}", data=b"x", labels=labels)
        made.append(doomed)
        service = sleeper(dclient, f"shoal-store-svc-{tag}", replicas=0)   # no tasks: only our own changes
        made.append(service)
        wait_for(lambda: stream.has("create", doomed.id) and stream.has("create", service.id), 5,
                 message="the baseline creates on the stream")
        time.sleep(0.3)
        last_id = stream.frames[-1][0]
        feed_before = httpx.get(f"{server.base}/history.atom", timeout=10).text

        server.stop()                       # the client is connected: its stream ends with the server
        wait_for(lambda: stream.ended, 5, message="the stream ended with the server")
        stream.close()

        config = dclient.configs.create(name=f"shoal-store-new-{tag}", data=b"y", labels=labels)
        made.append(config)
        for round_ in ("1", "2"):           # two updates while down: one net update after the restart
            service.reload()
            dclient.api.update_service(service.id, service.version, labels={**labels, "shoal.store": round_},
                                       fetch_current_spec=True)
        fleeting = dclient.configs.create(name=f"shoal-store-fleeting-{tag}", data=b"z", labels=labels)
        fleeting.remove()                   # created and removed while down: nothing to see
        doomed.remove()
        made.remove(doomed)

        server.start()
        again = Stream(server.base, last_event_id=last_id)
        ours = {doomed.id, service.id, config.id, fleeting.id}
        wait_for(lambda: sum(item["id"] in ours for _, item in again.items()) >= 3, 5,
                 message="the missed changes replayed")
        time.sleep(0.5)
        items = again.items()
        assert not [f for f in again.frames if f[1] == "sync"], "a sync instead of the replay"
        mine = sorted((item["action"], item["type"], item["id"]) for _, item in items if item["id"] in ours)
        assert mine == sorted([("create", "config", config.id), ("update", "service", service.id),
                               ("remove", "secret", doomed.id)]), mine
        ids = [frame_id for frame_id, _ in items]
        assert ids == sorted(ids) and ids[0] > int(last_id)

        # /history: numbered right after the last id the client saw, no hole, the same changes as the stream.
        history = history_since(server.base, int(last_id))
        seqs = [entry["id"] for entry in history]
        assert seqs == list(range(int(last_id) + 1, int(last_id) + 1 + len(seqs))), seqs
        upto = max(ids)
        streamed = sorted((item["type"], item["action"], item["id"]) for _, item in items)
        recorded = sorted((e["type"], e["action"], e["resourceId"]) for e in history if e["id"] <= upto)
        assert streamed == recorded

        # The sequence continued from the file: restored, and the feed's entry ids kept their epoch.
        restored = [r for r in server.log_records() if r.get("msg") == "state restored"]
        assert restored and restored[0]["last_seq"] >= int(last_id), restored
        feed_after = httpx.get(f"{server.base}/history.atom", timeout=10).text
        epoch_before = feed_before.split("urn:service:history:", 1)[1].split("-", 1)[0]
        epoch_after = feed_after.split("urn:service:history:", 1)[1].split("-", 1)[0]
        assert epoch_before == epoch_after
        again.close()
    finally:
        for thing in made:
            with contextlib.suppress(docker.errors.NotFound):
                thing.remove()


def _children(pid: int) -> list[int]:
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


def test_after_a_crash_a_resuming_client_gets_sync_not_reused_numbers(server: Server, dclient: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    try:
        server.start()
        stream = Stream(server.base)
        marker = dclient.configs.create(name=f"shoal-store-crash-{tag}", data=b"x", labels={TEST_LABEL: "1"})
        made.append(marker)
        wait_for(lambda: stream.has("create", marker.id), 5, message="the marker on the stream")
        last_id = int(stream.frames[-1][0])
        assert server.proc is not None
        workers = _children(server.proc.pid)
        assert workers, "no gunicorn worker found"
        for pid in workers:                        # the worker dies without its exit hooks: a crash
            os.kill(pid, 9)
        server.proc.kill()
        server.proc.wait(timeout=10)
        server.proc = None
        wait_for(lambda: stream.ended, 5, message="the stream ended with the server")
        stream.close()

        server.start()
        again = Stream(server.base, last_event_id=str(last_id))
        wait_for(lambda: again.frames, 5, message="the answer to the resuming client")
        assert again.frames[0][1] == "sync", again.frames[:3]
        warned = [r for r in server.log_records() if "not closed in order" in r.get("msg", "")]
        assert warned and warned[0]["next_seq"] > last_id, warned
        newest = httpx.get(f"{server.base}/history?limit=1", headers={"Accept": "application/json"},
                           timeout=10).json()["items"]
        assert not newest or newest[0]["id"] >= warned[0]["next_seq"]
        again.close()
    finally:
        for thing in made:
            with contextlib.suppress(docker.errors.NotFound):
                thing.remove()
