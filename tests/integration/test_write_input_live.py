"""Writes that cannot move objects between stacks or lie about what they checked, against a real gunicorn
(headers-mode ACL, operations level 3) on the lab swarm.

- bob writes ``stack:<N>`` (this test's own namespace) and creates configs: his label writes cannot add,
  change or drop ``com.docker.stack.*`` labels (400 API017, the engine keeps the label), and a config
  labelled into ``demo`` is refused (403 ACL002 ``stack:demo``), into ``<N>`` created.
- ``If-Match`` with the ETag of ``GET /services/{id}/labels`` (or of the detail) goes through while the
  service's tasks keep changing (a crashing service restarts every second), and is 412 once another writer
  (the docker SDK) changed the labels; ``"a", *`` is 400 API016.
- Bad input answered with its code, never reaching the engine: a deeply nested body (API015), an env name
  with NUL (API006), logs ``since=100000000h`` and ``+99:99`` offsets (LOG003/LOG004).

Objects: services ``<N>_web`` (sleeper) and ``<N>_crash`` (exits every second), configs made here; all
removed at teardown. Demo objects are not written.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import pytest
import requests

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import IMAGE, TEST_LABEL, sleeper

pytestmark = pytest.mark.integration

STACK = "com.docker.stack.namespace"
MERGE = "application/merge-patch+json"
N = f"twin{uuid.uuid4().hex[:6]}"
WEB, CRASH = f"{N}_web", f"{N}_crash"
POLICY = {"grants": [
    {"resources": [f"stack:{N}", "config:*"], "audience": ["user:bob"], "permissions": ["read", "write"]},
]}
BOB = {"X-User": "bob"}


@dataclass
class Lab:
    base: str
    web: str
    crash: str
    api: docker.APIClient
    client: docker.DockerClient

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {**BOB, **kwargs.pop("headers", {})}
        return requests.request(method, self.base + path, headers=headers, timeout=30, **kwargs)

    def merge(self, path: str, document: Any, **headers: str) -> requests.Response:
        return self.call("PATCH", path, data=json.dumps(document),
                         headers={"Content-Type": MERGE, **headers})

    def labels(self, service_id: str) -> dict[str, str]:
        return dict(self.api.inspect_service(service_id)["Spec"].get("Labels") or {})


@pytest.fixture(scope="module")
def lab(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    made: list[Any] = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("gunicorn-input") / "server.log"
    proc = None
    try:
        made.append(sleeper(client, WEB, labels={STACK: N}))
        made.append(client.services.create(
            IMAGE, ["sh", "-c", "sleep 1; exit 1"], name=CRASH, labels={TEST_LABEL: "1", STACK: N}, init=True,
            restart_policy=docker.types.RestartPolicy(condition="any", delay=0),
            endpoint_spec=docker.types.EndpointSpec(mode="dnsrr")))
        env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state-input")),
                           SERVICE_AUTH_MODE="headers", SERVICE_TRUSTED_PROXIES="127.0.0.1/32",
                           SERVICE_AUTH_HEADERS_SUBJECT="X-User", SERVICE_ACL_POLICY=json.dumps(POLICY),
                           SERVICE_OPERATIONS_LEVEL="3")
        proc = launch_gunicorn(env, log_path, base)
        lab = Lab(base, made[0].id, made[1].id, client.api, client)
        wait_for(lambda: lab.call("GET", f"/services/{lab.crash}").status_code == 200
                 and lab.call("GET", f"/services/{lab.web}").status_code == 200, 20, message="services cached")
        yield lab
    finally:
        for service in made:
            with contextlib.suppress(docker.errors.NotFound):
                service.remove()
        for config in client.configs.list(filters={"label": TEST_LABEL}):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                config.remove()
        for config in client.configs.list(filters={"name": N}):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                config.remove()
        if proc is not None:
            stop_gunicorn(proc, log_path)
        client.close()


def problem(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


# ---------------------------------------------------------------------------------------------- stack labels
def test_a_stack_writer_cannot_move_a_service_out_of_its_stack(lab: Lab) -> None:
    path = f"/services/{lab.web}/labels"
    body = problem(lab.merge(path, {STACK: "ops"}), 400, "API017")
    assert body["labels"] == [STACK]
    problem(lab.call("PUT", path, json={"team": "x"}), 400, "API017")               # dropping it leaves the stack
    problem(lab.merge(path, {"com.docker.stack.image": "x"}), 400, "API017")
    assert lab.labels(lab.web)[STACK] == N
    ok = lab.merge(path, {"team": "x"})
    assert ok.status_code == 200, ok.text
    assert lab.labels(lab.web) == {**lab.labels(lab.web), STACK: N, "team": "x"}
    kept = lab.call("PUT", path, json={"labels": {**ok.json()["labels"], "team": "y"}})   # sent back unchanged
    assert kept.status_code == 200, kept.text
    assert lab.labels(lab.web)[STACK] == N and lab.labels(lab.web)["team"] == "y"


def test_a_create_into_a_stack_needs_write_on_that_stack(lab: Lab) -> None:
    body = {"name": f"{N}_cfg_demo", "data": "aGk=", "labels": {STACK: "demo", TEST_LABEL: "1"}}
    refused = problem(lab.call("POST", "/configs", json=body), 403, "ACL002")
    assert refused["resource"] == "stack:demo"
    assert not lab.client.configs.list(filters={"name": f"{N}_cfg_demo"})
    own = lab.call("POST", "/configs", json={**body, "name": f"{N}_cfg", "labels": {STACK: N, TEST_LABEL: "1"}})
    assert own.status_code == 201, own.text
    created_id = own.headers["Location"].rsplit("/", 1)[-1]
    assert lab.client.configs.get(created_id).attrs["Spec"]["Labels"][STACK] == N
    plain = lab.call("POST", "/configs", json={"name": f"{N}_plain", "data": "aGk=", "labels": {TEST_LABEL: "1"}})
    assert plain.status_code == 201, plain.text


# ---------------------------------------------------------------------------------------------- If-Match
def detail_tag(lab: Lab) -> str:
    return lab.call("GET", f"/services/{lab.crash}").headers["ETag"]


def test_if_match_holds_while_tasks_change_and_not_after_another_writer(lab: Lab) -> None:
    path = f"/services/{lab.crash}/labels"
    labels_tag = lab.call("GET", path).headers["ETag"]
    first_detail = detail_tag(lab)
    wait_for(lambda: detail_tag(lab) != first_detail, 30, message="a task of the crashing service changed")
    # the detail's bytes changed (tasks), the service did not: both tags still hold
    answer = lab.merge(path, {"round": "1"}, **{"If-Match": first_detail})
    assert answer.status_code == 200, answer.text
    problem(lab.merge(path, {"round": "2"}, **{"If-Match": labels_tag}), 412, "SVC001")   # our own write changed it
    for round_number in range(3):
        tag = lab.call("GET", path).headers["ETag"]
        seen = detail_tag(lab)
        wait_for(lambda: detail_tag(lab) != seen, 30, message="another task change")   # noqa: B023
        answer = lab.merge(path, {"round": str(round_number + 2)}, **{"If-Match": tag})
        assert answer.status_code == 200, answer.text
    assert lab.labels(lab.crash)["round"] == "4"
    tag = lab.call("GET", path).headers["ETag"]
    spec = lab.api.inspect_service(lab.crash)
    lab.api.update_service(lab.crash, version=spec["Version"]["Index"], task_template=spec["Spec"]["TaskTemplate"],
                           name=spec["Spec"]["Name"], labels={**spec["Spec"]["Labels"], "other": "writer"},
                           mode=spec["Spec"]["Mode"], endpoint_spec=spec["Spec"].get("EndpointSpec"))
    wait_for(lambda: lab.call("GET", path).json()["labels"].get("other") == "writer", 20,
             message="the other writer's change cached")
    problem(lab.merge(path, {"round": "stale"}, **{"If-Match": tag}), 412, "SVC001")
    assert lab.labels(lab.crash)["round"] == "4"
    problem(lab.merge(path, {"round": "x"}, **{"If-Match": '"a", *'}), 400, "API016")
    problem(lab.merge(path, {"round": "x"}, **{"If-Match": "unquoted"}), 400, "API016")
    assert lab.labels(lab.crash)["round"] == "4"


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_input_gets_its_code_and_never_reaches_the_engine(lab: Lab) -> None:
    version = lab.api.inspect_service(lab.web)["Version"]["Index"]
    nested = "[" * 100_000 + "]" * 100_000
    problem(lab.call("PUT", f"/services/{lab.web}/env", data='{"env": ' + nested + "}",
                     headers={"Content-Type": "application/json"}), 400, "API015")
    problem(lab.call("PATCH", f"/services/{lab.web}/env", data=nested,
                     headers={"Content-Type": "application/json-patch+json"}), 400, "API015")
    problem(lab.call("POST", "/configs", data='{"name": "x", "data": "aGk=", "labels": ' + "{\"a\":" * 20_000 + "1"
                     + "}" * 20_000 + "}", headers={"Content-Type": "application/json"}), 400, "API015")
    body = problem(lab.call("PUT", f"/services/{lab.web}/env", json={"A\u0000B": "1"}), 400, "API006")
    assert body["field"] == "env.A\\x00B"
    problem(lab.merge(f"/services/{lab.web}/env", {"OK": "x\u0000y"}), 400, "API006")
    assert lab.api.inspect_service(lab.web)["Version"]["Index"] == version
    for query, code in (("since=100000000h", "LOG003"), ("after=2026-01-01T00:00:00%2B99:99", "LOG003"),
                        ("before=2026-01-01T00:00:00-24:00", "LOG004"), ("since=0000-01-01T00:00:00Z", "LOG003"),
                        ("after=" + "9" * 400 + "h", "LOG003")):
        for path in (f"/services/{lab.web}/logs", f"/services/{lab.web}/logs?limit=5"):
            url = path + ("&" if "?" in path else "?") + query
            body = problem(lab.call("GET", url), 400, code)
            assert "engine" not in body["detail"].lower() and len(body["detail"]) < 300, body
    started = time.monotonic()
    good = lab.call("GET", f"/services/{lab.web}/logs?since=1h&limit=5")
    assert good.status_code == 200 and time.monotonic() - started < 10
