"""ACL policy hot reload through a real gunicorn on the lab swarm (``acl.policy_file``, docs/acl.md).

Auth mode ``headers`` (the test client is the trusted proxy on 127.0.0.1 and names the user in ``X-User``),
the policy in a temporary file. Without a restart: alice, without a grant, is refused ``demo_web``
(403 ``ACL001``, absent from ``/services``); a grant written to the file lets her in within a second; an
invalid file keeps her access and the log says why (without the file's content); a file without her grant
takes it away again; a deleted file keeps the last policy.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for

JSON = {"Accept": "application/json"}
RELOAD_BOUND = 1.0          # a policy change is seen within 1 s
# bob always reads the ops stack: the policy is never empty, so alice is refused by default deny.
BOB_GRANT = {"resources": ["stack:ops"], "audience": ["user:bob"], "permissions": ["read"]}
ALICE_GRANT = {"resources": ["service:demo_web"], "audience": ["user:alice"], "permissions": ["read"]}
MARKER = "NOT-LOGGED-" + os.urandom(4).hex()


@dataclass(frozen=True, slots=True)
class Server:
    base: str
    policy: Path
    log: Path
    web_id: str

    def get(self, path: str, user: str = "alice") -> requests.Response:
        return requests.get(f"{self.base}{path}", headers={**JSON, "X-User": user}, timeout=10)

    def write(self, *grants: dict[str, Any], replace: bool = False) -> float:
        """Write the policy (in place, or by rename like an editor); return when it was written."""
        text = json.dumps({"grants": list(grants)}, indent=2)
        if replace:
            staged = self.policy.with_name("policy.staged")
            staged.write_text(text)
            os.replace(staged, self.policy)
        else:
            self.policy.write_text(text)
        return time.monotonic()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def server(docker_host: str, engine: docker.APIClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    web = engine.services(filters={"name": "demo_web"})  # type: ignore[no-untyped-call]
    web_id = next(s["ID"] for s in web if s["Spec"]["Name"] == "demo_web")
    folder = tmp_path_factory.mktemp("acl-reload")
    policy = folder / "policy.json"
    policy.write_text(json.dumps({"grants": [BOB_GRANT]}))
    port = free_port()
    base, log_path = f"http://127.0.0.1:{port}", folder / "server.log"
    env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(folder / "state"),
                       SERVICE_AUTH_MODE="headers", SERVICE_AUTH_HEADERS_SUBJECT="X-User",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1", SERVICE_ACL_POLICY_FILE=str(policy))
    process = launch_gunicorn(env, log_path, base)
    try:
        yield Server(base, policy, log_path, web_id)
    finally:
        stop_gunicorn(process, log_path)


def service_names(response: requests.Response) -> set[str]:
    assert response.status_code == 200, response.text[:500]
    return {item["Spec"]["Name"] for item in response.json()["items"]}


def refused(server: Server) -> bool:
    answer = server.get(f"/services/{server.web_id}")
    if answer.status_code != 403:
        assert answer.status_code == 200, answer.text[:500]
        return False
    body = answer.json()
    assert body["code"] == "ACL001" and body["permission"] == "read", body
    return True


def allowed(server: Server) -> bool:
    answer = server.get(f"/services/{server.web_id}")
    assert answer.status_code in (200, 403), answer.text[:500]
    return answer.status_code == 200


def within(condition: Any, bound: float, started: float, what: str) -> float:
    """Wait (at most 10 s) for ``condition``; fail when it took longer than ``bound`` after ``started``."""
    wait_for(condition, 10, interval=0.05, message=what)
    elapsed = time.monotonic() - started
    assert elapsed <= bound, f"{what} took {elapsed:.2f} s (bound {bound} s)"
    return elapsed


def test_a_user_gains_and_loses_access_without_a_restart(server: Server) -> None:
    # 1. No grant for alice: default deny (bob's grant makes the policy non-empty).
    assert refused(server)
    assert "demo_web" not in service_names(server.get("/services"))
    assert server.get("/profile").json().get("permissions", {}) == {}
    assert server.get("/services", user="bob").status_code == 200

    # 2. A grant for alice, written in place: she sees demo_web within a second.
    started = server.write(BOB_GRANT, ALICE_GRANT)
    gained = within(lambda: allowed(server), RELOAD_BOUND, started, "alice gaining demo_web")
    assert service_names(server.get("/services")) == {"demo_web"}
    assert server.get("/profile").json()["permissions"] == {"service:demo_web": ["read"]}
    wait_for(lambda: "acl policy reloaded (2 grants)" in server.log_text(), 5, message="the reload log line")

    # 3. An invalid file: the previous policy stays, the log says why, never the content.
    server.write({"resources": ["service:demo_web"], "audience": [f"user:{MARKER}"], "permissions": ["fly"]})
    wait_for(lambda: "acl policy reload failed, keeping the previous policy" in server.log_text(), 5,
             message="the refused reload in the log")
    line = next(line for line in server.log_text().splitlines() if "acl policy reload failed" in line)
    assert "unknown permission 'fly'" in line and MARKER not in server.log_text()
    assert allowed(server)
    assert service_names(server.get("/services")) == {"demo_web"}

    # 4. The grant removed (an editor's write-then-rename): she loses access within a second.
    started = server.write(BOB_GRANT, replace=True)
    lost = within(lambda: refused(server), RELOAD_BOUND, started, "alice losing demo_web")
    assert "demo_web" not in service_names(server.get("/services"))
    print(f"reload seen after {gained * 1000:.0f} ms (grant) and {lost * 1000:.0f} ms (revoke)")

    # 5. The file deleted: the last policy stays (alice still refused, bob still reads ops).
    server.policy.unlink()
    wait_for(lambda: "acl policy file removed, keeping the previous policy" in server.log_text(), 5,
             message="the removal in the log")
    assert refused(server)
    bobs = service_names(server.get("/services", user="bob"))
    assert bobs and all(name.startswith("ops_") for name in bobs), bobs

    # 6. Created again with her grant: loaded.
    started = server.write(BOB_GRANT, ALICE_GRANT)
    within(lambda: allowed(server), RELOAD_BOUND, started, "alice regaining demo_web after a re-create")


def test_a_refused_request_is_not_an_authentication_failure(server: Server) -> None:
    """Without the subject header the caller is unauthenticated (401), whatever the policy says."""
    answer = requests.get(f"{server.base}/services/{server.web_id}", headers=JSON, timeout=10)
    assert answer.status_code == 401 and answer.json()["code"] == "AUT001"
