"""A full disk under the state store, for real: the data directory on a small tmpfs, filled up with a file,
while gunicorn runs on the lab swarm.

- Writes fail with SQLite's own "database or disk is full" (logged once, not every flush); readiness
  (``store.state``) and ``/-/metrics`` (``shoal_store_*``) say so while the service still answers reads.
- Space freed: the writes recover (logged once), and ``/history`` equals what the file committed.
- Filled again and stopped with SIGTERM: the file is *not* marked clean; at the next start every committed
  record is kept, the numbering continues past a gap covering what the stopped process sent, a client
  resuming from such an id gets ``sync``, one resuming from a committed id gets exactly what followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.engine_state import TEST_LABEL
from tests.integration.store_support import Server, Stream, committed, history_since

pytestmark = pytest.mark.integration

DISK_MB = 24


@pytest.fixture
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_MB MiB (the tests run as root), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (root needed): {done.stderr.strip()}", pytrace=False)
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, timeout=10).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=10)


@pytest.fixture
def server(docker_host: str, tmp_path: Path, disk: Path) -> Iterator[Server]:
    running = Server(docker_host, disk / "state", tmp_path)
    yield running
    if running.proc is not None:
        running.stop()


def _fill(disk: Path) -> Path:
    """Write a filler file until the tmpfs is full, to the last page (bounded by its size)."""
    filler = disk / f"filler-{uuid.uuid4().hex[:6]}"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (256 * 1024, 4096):
            chunk = b"\0" * size
            for _ in range(DISK_MB * 1024 * 1024 // size + 8):
                try:
                    if os.write(descriptor, chunk) < size:
                        break
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
            else:
                pytest.fail("the tmpfs never filled up", pytrace=False)
    finally:
        os.close(descriptor)
    return filler


def _big_configs(dclient: Any, tag: str, made: list[Any], count: int) -> list[Any]:
    """Configs with 300 KB of data each: their records need far more room than the WAL has left."""
    configs = []
    for number in range(count):
        config = dclient.configs.create(name=f"shoal-disk-{tag}-{number}", data=os.urandom(300_000),
                                        labels={TEST_LABEL: "1"})
        made.append(config)
        configs.append(config)
    return configs


def _metric(base: str, name: str, label: str = "") -> float:
    text = httpx.get(f"{base}/-/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + label + " ") or (not label and line.startswith(name + " ")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{label} not in /-/metrics")


def _messages(server: Server, text: str) -> list[dict[str, Any]]:
    return [r for r in server.log_records() if r.get("msg") == text]


def test_a_full_disk_is_reported_survived_and_never_marked_clean_with_writes_pending(
        server: Server, disk: Path, dclient: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    try:
        server.start()
        wait_for(lambda: int(committed(server.state)[1]["last_seq"]) >= server.ready()["sequence"], 10,
                 message="the first sync committed")
        assert server.ready()["store"]["state"] == "ok"

        # 1. Full: writes fail, said once, shown by readiness and metrics; reads still answer.
        filler = _fill(disk)
        stream = Stream(server.base)
        configs = _big_configs(dclient, tag, made, 4)
        wait_for(lambda: server.ready()["store"]["state"] == "failing", 15, message="readiness: store failing")
        ready = server.ready()
        assert ready["httpStatus"] == 200 and ready["store"]["pendingBytes"] > 0, ready
        assert "database or disk is full" in ready["store"]["lastError"], ready
        assert _metric(server.base, "shoal_store_state", '{state="failing"}') == 1.0
        assert _metric(server.base, "shoal_store_pending_bytes") > 0
        assert _metric(server.base, "shoal_store_write_errors_total") >= 1
        wait_for(lambda: _metric(server.base, "shoal_store_write_errors_total") >= 2, 30, interval=0.2,
                 message="several failed retries")
        failed = _messages(server, "state store writes fail; changes are kept in memory and retried")
        assert len(failed) == 1 and "database or disk is full" in failed[0]["error"], failed
        assert _metric(server.base, "shoal_store_write_errors_total") >= 2
        assert httpx.get(f"{server.base}/configs/{configs[0].id}", timeout=5).status_code == 200

        # 2. Space again: recovered (said once), /history equals the file.
        filler.unlink()
        wait_for(lambda: server.ready()["store"]["state"] == "ok", 40, interval=0.5, message="the store recovered")
        assert len(_messages(server, "state store writes recovered")) == 1
        wait_for(lambda: stream.has("create", configs[-1].id), 5, message="the creates on the stream")
        history = history_since(server.base, 0)
        recorded = {e["id"]: (e["type"], e["action"], e["resourceId"]) for e in history}
        # /history first, then the file once it has caught up with it (a change after the recovery, e.g. a
        # demo task's, is in memory a flush window before it is in the file).
        newest = history[-1]["id"]

        def caught_up() -> dict[int, tuple[str, str, str]] | None:
            found = committed(server.state)[0]
            return found if max(found, default=0) >= newest else None

        rows = wait_for(caught_up, 15, interval=0.1, message="the file caught up with /history")
        assert isinstance(rows, dict)
        assert {seq: row for seq, row in rows.items() if seq <= history[-1]["id"]} == recorded
        assert all(recorded.get(seq) for seq in {int(f[0]) for f in stream.frames if f[1] != "sync"})

        # 3. Full again, then SIGTERM: the final flush fails, so the file is not marked clean.
        end = max(rows)
        filler = _fill(disk)
        late = _big_configs(dclient, tag + "-late", made, 3)
        wait_for(lambda: stream.has("create", late[-1].id), 5, message="the late creates on the stream")
        wait_for(lambda: server.ready()["store"]["state"] == "failing", 15, message="failing again")
        sent = max(int(f[0]) for f in stream.frames if f[1] != "sync")
        server.stop()                       # exit status 0, no traceback (checked by stop)
        stream.close()
        assert _messages(server, "state store closed with changes unwritten; not marked clean, so the next "
                                 "start keeps what was committed and continues the numbering past a gap")
        rows, meta = committed(server.state)
        assert meta["clean"] == "0" and max(rows) < sent, (meta, max(rows), sent)

        # 4. Space again, start: committed records kept, numbering past a gap, resumes judged by it.
        filler.unlink()
        server.start()
        warned = [r for r in server.log_records() if "not closed in order" in r.get("msg", "")]
        assert warned and warned[0]["committed_seq"] == max(rows) and warned[0]["next_seq"] > sent, warned
        after = history_since(server.base, 0)
        assert {e["id"]: (e["type"], e["action"], e["resourceId"]) for e in after if e["id"] <= max(rows)} \
            == {seq: row for seq, row in rows.items()}
        gapped = Stream(server.base, last_event_id=str(sent))
        wait_for(lambda: gapped.frames, 5, message="the answer to an id inside the gap")
        assert gapped.frames[0][1] == "sync"
        gapped.close()
        resumed = Stream(server.base, last_event_id=str(end))
        wait_for(lambda: any(resumed.has("create", c.id) for c in late), 5, message="the replay after the end")
        assert not [f for f in resumed.frames if f[1] == "sync"]
        resumed.close()
    finally:
        for thing in made:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                thing.remove()
