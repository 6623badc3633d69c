"""kill -9 at a random point of a burst of changes (the store loses nothing at any stop, docs/state-store.md), through
real gunicorn on the lab swarm, with an independent SSE client on ``/events``:

- ``worker``: the worker is SIGKILLed (no exit hook); the master starts a new one on the same file.
- ``master``: the master is SIGKILLed; its orphaned worker stops in order on its own; a new service starts.
- ``both``: worker and master SIGKILLed; a new service starts.

Afterwards: ``/history`` equals what the file committed (read directly with sqlite3); no id ever names two
changes (every frame id seen before the kill is either the same change in ``/history`` or lies inside the
gap the restart reports, which ``/history`` leaves empty); and a client resuming from the last id it saw
gets exactly the changes after it (if that id was committed) or ``sync`` (if it lies inside the gap)."""

from __future__ import annotations

import contextlib
import random
import uuid
from typing import Any

import docker
import gevent
import pytest

from tests.conftest import wait_for, wait_steady
from tests.integration.engine_state import TEST_LABEL
from tests.integration.store_support import Server, Stream, committed, history_since, server_fixture

pytestmark = pytest.mark.integration

BURST = 30            # create + remove pairs: 60 changes, a few seconds against the lab engine
Change = tuple[str, str, str]   # (type, action, resource id)


@pytest.fixture
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


server = server_fixture()


def _burst(dclient: Any, tag: str, made: list[Any], stop: list[bool]) -> None:
    """Create a config, remove the previous one; bounded in count, and stopped early on request."""
    previous = None
    for number in range(BURST):
        if stop:
            return
        config = dclient.configs.create(name=f"shoal-burst-{tag}-{number}", data=b"x", labels={TEST_LABEL: "1"})
        made.append(config)
        if previous is not None:
            previous.remove()
        previous = config
        gevent.sleep(0.03)   # pacing, not a wait: the burst spreads over the time the kill may fall in


def _frame_changes(stream: Stream) -> dict[int, Change]:
    """Frame id → the change it names (a batch's id is its last event's number)."""
    named: dict[int, Change] = {}
    for frame_id, name, data in list(stream.frames):
        if name == "sync":
            continue
        last = data[-1] if name == "batch" else data
        named[int(frame_id)] = (last["type"], last["action"], last["id"])
    return named


def _quiet_history(server: Server) -> list[dict[str, Any]]:
    """/history once its newest id has stayed the same for a second (bounded)."""
    history: list[dict[str, Any]] = wait_steady(lambda: history_since(server.base, 0), 1.0, 30, interval=0.2,
                                                message="/history settled")
    return history


@pytest.mark.parametrize("victim", ["worker", "master", "both"])
def test_a_kill_during_a_burst_loses_only_what_was_never_committed(victim: str, server: Server,
                                                                   dclient: Any) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    stop: list[bool] = []
    why = f"victim {victim}, seed {seed}"
    try:
        server.start()
        stream = Stream(server.base)
        burst = gevent.spawn(_burst, dclient, tag, made, stop)
        wait_for(lambda: _frame_changes(stream), 10, message="the burst on the stream")
        gevent.sleep(rng.uniform(0.0, 1.5))   # not a wait: the kill falls at a random point of the burst
        if victim == "worker":
            server.kill_worker()
        elif victim == "master":
            server.kill_master()
        else:
            server.kill_all()
        wait_for(lambda: stream.ended, 20, message=f"the stream ended with the server ({why})")
        stream.close()
        seen = _frame_changes(stream)
        assert seen, f"nothing seen before the kill ({why})"
        last_seen = max(seen)
        if victim == "worker":
            wait_for(lambda: server.ready()["httpStatus"] == 200, 30, interval=0.2, message="the new worker ready")
        else:
            server.start()
        burst.join(timeout=60)
        assert burst.dead, f"the burst did not end ({why})"
        burst.get()   # the engine never failed meanwhile

        again = Stream(server.base, last_event_id=str(last_seen))
        history = _quiet_history(server)
        newest = history[-1]["id"]
        wait_for(lambda: again.frames and (again.frames[0][1] == "sync" or max(_frame_changes(again)) >= newest),
                 10, message=f"the resumed stream caught up ({why})")
        recorded = {entry["id"]: (entry["type"], entry["action"], entry["resourceId"]) for entry in history}
        warned = [r for r in server.log_records() if "not closed in order" in r.get("msg", "")]
        gap = (warned[0]["committed_seq"], warned[0]["next_seq"]) if warned else None
        assert (gap is None) == (victim == "master"), f"an orphaned worker stops in order, a kill does not ({why})"

        print(f"{why}: last id seen {last_seen}, gap {gap}, /history newest {newest}")   # shown with -s
        # No id names two changes: what was sent before the kill is in /history as itself, or inside the gap.
        for frame_id, change in seen.items():
            if frame_id in recorded:
                assert recorded[frame_id] == change, f"id {frame_id} names two changes ({why})"
            else:
                assert gap is not None and gap[0] < frame_id < gap[1], f"id {frame_id} lost ({why}, gap {gap})"
        if gap is not None:
            assert not [seq for seq in recorded if gap[0] < seq < gap[1]], f"/history inside the gap ({why})"

        # The resumed client: exactly what it missed, or sync when its id lies inside the gap.
        if gap is not None and last_seen > gap[0]:
            assert again.frames[0][1] == "sync", f"{again.frames[:2]} ({why})"
        else:
            assert not [f for f in again.frames if f[1] == "sync"], f"a sync instead of the replay ({why})"
            # up to the newest frame /history already held: the lab's crash-looping service keeps adding task
            # updates, which the stream may carry past the /history read
            upto = max((fid for fid in _frame_changes(again) if fid <= newest), default=last_seen)
            items = [(item["type"], item["action"], item["id"]) for fid, item in again.items() if fid <= upto]
            assert items == [recorded[seq] for seq in sorted(recorded) if last_seen < seq <= upto], why
        again.close()

        # /history equals what the file committed (read after an orderly stop: everything is in it).
        server.stop()
        rows, meta = committed(server.state)
        assert meta["clean"] == "1", why
        assert {seq: row for seq, row in rows.items() if seq <= newest} == recorded, why
    finally:
        stop.append(True)
        for thing in made:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                thing.remove()
