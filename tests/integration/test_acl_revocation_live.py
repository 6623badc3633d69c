"""Open streams across a policy hot reload (docs/acl.md "Streams"), through a real gunicorn on the lab swarm.

Auth mode ``headers`` (the test client is the trusted proxy on 127.0.0.1), the policy in a file. alice
reads this test's own service ``<N>`` and holds three streams (the ``/services`` list, the service's
detail, ``/events``); bob reads the ops stack and holds ``/events``; carol reads the service too, is never
revoked, and holds ``/events`` (her stream shows when a change has been delivered). Without a restart:

1. alice's grant is removed from the file: each of her streams gets ``sync`` at once (no change has to
   happen first), bob's gets nothing (his grants did not change);
2. the service changes while she is revoked: none of her streams shows it (carol's does);
3. her grant is written back: each of her streams gets ``sync`` again, and the refetch it asks for shows
   the change she was not shown; the next change reaches her streams as an event.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import gevent
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import sleeper

pytestmark = pytest.mark.integration

NAME = f"trevoke{uuid.uuid4().hex[:6]}"
BOB_GRANT = {"resources": ["stack:ops"], "audience": ["user:bob"], "permissions": ["read"]}
ALICE_GRANT = {"resources": [f"service:{NAME}"], "audience": ["user:alice"], "permissions": ["read"]}
CAROL_GRANT = {"resources": [f"service:{NAME}"], "audience": ["user:carol"], "permissions": ["read"]}
BOUND = 3.0        # reload (≤ ~0.4 s) + one flush + the stream's write: seconds until a sync is seen


@dataclass
class Stream:
    """An open SSE response read by its own greenlet into ``data``."""

    user: str
    path: str
    response: requests.Response
    data: bytearray = field(default_factory=bytearray)
    reader: Any = None

    def start(self) -> Stream:
        self.reader = gevent.spawn(self._read)
        return self

    def _read(self) -> None:
        with contextlib.suppress(requests.RequestException, OSError, AttributeError):
            for chunk in self.response.iter_content(chunk_size=None):
                self.data += chunk

    def events(self, since: int = 0) -> list[str]:
        """Event names after byte offset ``since``."""
        return [line[len("event: "):] for line in self.data[since:].decode(errors="replace").splitlines()
                if line.startswith("event: ")]

    def close(self) -> None:
        if self.reader is not None:      # first: closing under a pending read is a reentrant close
            self.reader.kill(block=True, timeout=2)
        self.response.close()


@dataclass(frozen=True, slots=True)
class Server:
    base: str
    policy: Path
    log: Path
    service_id: str

    def write(self, *grants: dict[str, Any]) -> None:
        self.policy.write_text(json.dumps({"grants": list(grants)}))

    def open(self, user: str, path: str) -> Stream:
        response = requests.get(f"{self.base}{path}", headers={"X-User": user, "Accept": "text/event-stream"},
                                stream=True, timeout=(5, 60))
        assert response.status_code == 200, (user, path, response.status_code, response.text[:300])
        return Stream(user, path, response).start()

    def get(self, path: str, user: str = "alice") -> requests.Response:
        return requests.get(f"{self.base}{path}", headers={"X-User": user, "Accept": "application/json"}, timeout=10)


@pytest.fixture(scope="module")
def client(docker_host: str) -> Iterator[docker.DockerClient]:
    made = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def server(docker_host: str, client: docker.DockerClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("acl-revoke")
    policy = folder / "policy.json"
    policy.write_text(json.dumps({"grants": [BOB_GRANT, ALICE_GRANT, CAROL_GRANT]}))
    service = sleeper(client, NAME)
    port = free_port()
    base, log_path = f"http://127.0.0.1:{port}", folder / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(folder / "state"), SERVICE_SSE_KEEPALIVE="1s",
                       SERVICE_AUTH_MODE="headers", SERVICE_AUTH_HEADERS_SUBJECT="X-User",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1", SERVICE_ACL_POLICY_FILE=str(policy))
    process = None
    try:
        process = launch_gunicorn(env, log_path, base)
        made = Server(base, policy, log_path, service.id)
        wait_for(lambda: made.get(f"/services/{service.id}").status_code == 200, 20, message="the service cached")
        yield made
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            service.remove()
        if process is not None:
            stop_gunicorn(process, log_path)


def label(client: docker.DockerClient, service_id: str, value: str) -> None:
    client.services.get(service_id).update(labels={"shoal.test": "1", "t-revoke": value})


def test_revocation_and_restoration_resync_open_streams(server: Server, client: docker.DockerClient) -> None:
    detail = f"/services/{server.service_id}"
    alice = [server.open("alice", path) for path in ("/services", detail, "/events")]
    bob = server.open("bob", "/events")
    carol = server.open("carol", "/events")
    streams = [*alice, bob, carol]
    try:
        wait_for(lambda: all(stream.data for stream in streams), 10, interval=0.02,
                 message="every stream registered (its first frame read)")
        # 1. revoked: sync at once on each of alice's streams, nothing for bob
        marks = [len(stream.data) for stream in streams]
        started = time.monotonic()
        server.write(BOB_GRANT, CAROL_GRANT)
        for stream, mark in zip(alice, marks, strict=False):
            wait_for(lambda s=stream, m=mark: "sync" in s.events(m), 10, interval=0.05,
                     message=f"sync on alice's {stream.path} at revocation")
        elapsed = time.monotonic() - started
        assert elapsed <= BOUND, f"the revocation's sync took {elapsed:.2f} s"
        assert server.get(detail).status_code == 403
        # 2. a change while revoked: none of alice's streams shows it
        marks = [len(stream.data) for stream in streams]
        stamp = str(int(time.time() * 1000))
        label(client, server.service_id, "while-revoked-" + stamp)
        wait_for(lambda: "while-revoked-" + stamp in carol.data[marks[-1]:].decode(errors="replace"), 20,
                 interval=0.05, message="the change on carol's stream")
        gevent.sleep(0.5)     # not a wait: a margin for a leaked frame of the same flush to reach alice's streams
        for stream, mark in zip(alice, marks, strict=False):
            seen = stream.events(mark)
            assert not [name for name in seen if name not in ("sync",)], (stream.path, seen)
            assert NAME not in stream.data[mark:].decode(errors="replace"), stream.path
        assert "sync" not in bob.events(0), "bob's grants never changed"
        assert "sync" not in carol.events(0), "carol's grants never changed"
        # 3. restored: sync again, and the refetch it asks for shows what she missed
        marks = [len(stream.data) for stream in streams]
        server.write(BOB_GRANT, ALICE_GRANT, CAROL_GRANT)
        for stream, mark in zip(alice, marks, strict=False):
            wait_for(lambda s=stream, m=mark: "sync" in s.events(m), 10, interval=0.05,
                     message=f"sync on alice's {stream.path} at restoration")
        refetched = server.get(detail)
        assert refetched.status_code == 200
        assert refetched.json()["service"]["Spec"]["Labels"]["t-revoke"] == "while-revoked-" + stamp
        assert "sync" not in bob.events(0)
        # ... and the next change is an event again
        marks = [len(stream.data) for stream in streams]
        label(client, server.service_id, "after-" + stamp)
        for stream, mark in zip(alice, marks, strict=False):
            wait_for(lambda s=stream, m=mark: "after-" + stamp in s.data[m:].decode(errors="replace"), 15,
                     interval=0.1, message=f"the next change on alice's {stream.path}")
    finally:
        for stream in streams:
            stream.close()
