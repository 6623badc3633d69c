"""Surviving a restart (docs/state-store.md) through the real server: gunicorn with a state directory on the lab
swarm, an independent SSE client (httpx-sse). With the client connected the service stops; a config is
created, a service updated twice, a secret removed and another config created and removed with the docker
SDK; the service starts again on the same state directory and the client reconnects with its
Last-Event-ID: it gets exactly the net changes made while the service was down (one create, one update,
one remove; nothing for the fleeting config; no ``sync``, no duplicate, no gap), and /history shows them
with no hole."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from typing import Any

import docker
import httpx
import pytest

from tests.conftest import wait_for, wait_steady
from tests.integration.engine_state import TEST_LABEL, sleeper
from tests.integration.store_support import Server, Stream, committed, history_since, server_fixture

pytestmark = pytest.mark.integration


@pytest.fixture
def dclient(docker_host: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


server = server_fixture()


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
        # The baseline's trailing frames land before the last id is taken: its id stays the same for 0.5 s.
        last_id = wait_steady(lambda: stream.frames[-1][0], 0.5, 15, message="the baseline's last frame")
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
        time.sleep(0.5)   # not a wait: a window in which no extra frame (nor a sync) may follow the replay
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


def test_after_a_crash_the_committed_history_stays_and_a_resuming_client_gets_what_it_missed(
        server: Server, dclient: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    made: list[Any] = []
    try:
        server.start()
        stream = Stream(server.base)
        marker = dclient.configs.create(name=f"shoal-store-crash-{tag}", data=b"x", labels={TEST_LABEL: "1"})
        made.append(marker)
        wait_for(lambda: stream.has("create", marker.id), 5, message="the marker on the stream")
        last_id = int(stream.frames[-1][0])
        wait_for(lambda: max(committed(server.state)[0], default=0) >= last_id, 5, message="the marker committed")
        before = history_since(server.base, 0)
        marker_feed = f"{server.base}/history.atom?resourceId={marker.id}"   # its own entry, whatever came since
        feed_before = httpx.get(marker_feed, timeout=10).text
        server.kill_all()                          # no exit hook runs anywhere: a crash
        wait_for(lambda: stream.ended, 5, message="the stream ended with the server")
        stream.close()
        gone = dclient.configs.create(name=f"shoal-store-after-{tag}", data=b"y", labels={TEST_LABEL: "1"})
        made.append(gone)

        server.start()
        again = Stream(server.base, last_event_id=str(last_id))
        wait_for(lambda: again.has("create", gone.id), 5, message="the change made while down, replayed")
        assert not [f for f in again.frames if f[1] == "sync"], again.frames[:3]
        warned = [r for r in server.log_records() if "not closed in order" in r.get("msg", "")]
        end, resumed = warned[0]["committed_seq"], warned[0]["next_seq"]
        assert end >= last_id and resumed > end + 1, warned
        after = history_since(server.base, 0)
        # Every committed record kept, same ids; the new ones numbered after the gap.
        assert [e for e in after if e["id"] <= last_id] == [e for e in before if e["id"] <= last_id]
        assert not [e for e in after if end < e["id"] < resumed]
        news = [e for e in after if e["id"] > end]
        assert news and news[0]["id"] == resumed
        assert [(e["action"], e["resourceId"]) for e in news if e["resourceId"] == gone.id] == [("create", gone.id)]
        feed_after = httpx.get(marker_feed, timeout=10).text
        marker_id = next(e["id"] for e in before if e["resourceId"] == marker.id and e["action"] == "create")
        kept = re.compile(rf"<id>([^<]*#\d+-{marker_id})</id>")   # this feed's id of the marker's record
        found_before, found_after = kept.search(feed_before), kept.search(feed_after)
        assert found_before is not None and found_after is not None, (feed_before[-600:], feed_after[-600:])
        assert found_before.group(1) == found_after.group(1)   # the kept record's feed id did not change
        again.close()
    finally:
        for thing in made:
            with contextlib.suppress(docker.errors.NotFound):
                thing.remove()
