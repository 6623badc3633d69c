"""Fuzz every write body and every query parameter of the OpenAPI document against a real gunicorn at
operations level 3 on the lab swarm: no answer is a 5xx: writes cannot hurt the cluster (docs/safety.md).

Two phases, bounded in count and time (about 3 minutes on the lab):

1. schemathesis generates requests for every documented operation from its schemas (seeded), with the
   path parameters pinned to this test's throw-away objects (a service, its task, a config, a secret, a
   network, a volume, the stack ``<N>``; the lab's node for node labels), so bodies and queries reach the
   views instead of stopping at a 404. Removals run last; a removed object is recreated for the next one.
2. Hostile values schemathesis does not produce: deeply nested bodies, NUL and lone surrogates in keys and
   values, numbers beyond float range, odd JSON Patch operations, to every write; and overflowing durations,
   impossible offsets, NUL, invalid UTF-8 and 5,000-digit numbers to every query parameter.

Not fuzzed, as they act on the whole swarm or on the network: swarm settings, token/CA/unlock-key rotation,
unlock, plugin install/upgrade/enable/disable/remove, node availability/role/removal. The server's
``writes.max_replicas`` is 2, so no scale or mode write can start more than a few tasks. Network and volume
drivers are pinned to ``overlay``/``local`` (the engine spends 15 s looking up an unknown driver plugin). What
the fuzz creates (configs, secrets, networks, volumes) is removed at teardown, and node labels are restored.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import free_port, gunicorn_env, launch_gunicorn, stop_gunicorn, wait_for
from tests.integration.engine_state import TEST_LABEL, sleeper

pytestmark = pytest.mark.integration

N = f"tfz{uuid.uuid4().hex[:6]}"
STACK = "com.docker.stack.namespace"
WRITE_EXAMPLES = 10
READ_EXAMPLES = 4
PHASE_ONE_SECONDS = 150.0         # after this, every remaining operation gets one example
REQUEST_TIMEOUT = 30
# Operations that act on the whole swarm, the network (plugin pulls) or the lab's nodes' membership.
EXCLUDED_PREFIXES = ("/swarm", "/plugins")
EXCLUDED = {("PUT", "/nodes/{id}/availability"), ("PUT", "/nodes/{id}/role"), ("DELETE", "/nodes/{id}")}
DRIVERS = {"/networks": "overlay", "/volumes": "local"}
# 503 ENG001 engine unreachable, 503 API013 busy, 504 ENG005 outcome unknown; the lab has no Prometheus, so the
# metrics proxy answers its documented 503 MTR001 (502 MTR002 for an upstream failure).
DOCUMENTED_5XX = {"ENG001", "API013", "ENG005", "MTR001", "MTR002"}


@dataclass
class Objects:
    """This test's throw-away objects (recreated when a fuzzed removal took one) and what the lab held
    before, so teardown removes exactly what the fuzz created."""

    client: docker.DockerClient
    ids: dict[str, str] = field(default_factory=dict)
    before: dict[str, set[str]] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def snapshot(self) -> None:
        api = self.client.api
        self.before = {"configs": {c["ID"] for c in api.configs()}, "secrets": {s["ID"] for s in api.secrets()},
                       "networks": {n["Id"] for n in api.networks()},
                       "volumes": {v["Name"] for v in api.volumes().get("Volumes") or []}}
        self.node_labels = {node["ID"]: dict(node["Spec"].get("Labels") or {}) for node in api.nodes()}

    def ensure(self) -> None:
        api, labels = self.client.api, {TEST_LABEL: "1", STACK: N}
        if not self._exists(api.inspect_service, "service"):
            self.ids["service"] = sleeper(self.client, f"{N}_svc", labels=labels).id
            self.ids.pop("task", None)
        if not self._exists(api.inspect_config, "config"):
            self.ids["config"] = self.client.configs.create(name=f"{N}_cfg", data=b"c", labels=labels).id
        if not self._exists(api.inspect_secret, "secret"):
            self.ids["secret"] = self.client.secrets.create(name=f"{N}_sec", data=b"s", labels=labels).id
        if not self._exists(api.inspect_network, "network"):
            self.ids["network"] = api.create_network(f"{N}_net", driver="overlay", attachable=True,
                                                     labels=labels)["Id"]
        if not self._exists(api.inspect_volume, "volume"):
            self.ids["volume"] = api.create_volume(f"{N}_vol", labels=labels)["Name"]
        if "task" not in self.ids:
            tasks = wait_for(lambda: api.tasks(filters={"service": self.ids["service"]}), 30,
                             message="a task of the fuzz service")
            self.ids["task"] = tasks[0]["ID"]
        self.ids["node"] = next(iter(self.node_labels))

    def _exists(self, inspect: Callable[[str], Any], key: str) -> bool:
        if key not in self.ids:
            return False
        try:
            inspect(self.ids[key])
        except docker.errors.NotFound:
            return False
        return True

    def pinned(self, path: str) -> str | None:
        """The value for every path parameter of an operation under ``path``."""
        first = path.strip("/").split("/")[0]
        return {"services": self.ids["service"], "tasks": self.ids["task"], "nodes": self.ids["node"],
                "configs": self.ids["config"], "secrets": self.ids["secret"], "networks": self.ids["network"],
                "volumes": self.ids["volume"], "stacks": N}.get(first)

    def clean(self) -> None:
        api = self.client.api
        removed: set[str] = set()
        with contextlib.suppress(docker.errors.APIError):
            for service in api.services(filters={"label": f"{STACK}={N}"}):
                api.remove_service(service["ID"])
                removed.add(service["ID"])
        # The removed services' tasks let go of networks, configs and secrets once they are gone (best effort:
        # the removals below ignore what is still held).
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not [t for t in api.tasks() if t["ServiceID"] in removed], 30, interval=0.2,
                     message="the removed services' tasks gone")
        removals: list[tuple[Callable[[str], Any], set[str]]] = [
            (api.remove_config, {c["ID"] for c in api.configs()} - self.before["configs"]),
            (api.remove_secret, {s["ID"] for s in api.secrets()} - self.before["secrets"]),
            (api.remove_network, {n["Id"] for n in api.networks()} - self.before["networks"]),
            (api.remove_volume, {v["Name"] for v in api.volumes().get("Volumes") or []} - self.before["volumes"]),
        ]
        for remove, created in removals:
            for object_id in created:
                with contextlib.suppress(docker.errors.APIError):
                    remove(object_id)
        for node in api.nodes():
            original = self.node_labels.get(node["ID"])
            if original is not None and (node["Spec"].get("Labels") or {}) != original:
                with contextlib.suppress(docker.errors.APIError):
                    api.update_node(node["ID"], node["Version"]["Index"], {**node["Spec"], "Labels": original})


@dataclass
class Tally:
    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    write_statuses: dict[int, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)

    def record(self, what: str, response: Any) -> None:
        """Count one answer (a requests or schemathesis response); keep a line for any server error."""
        self.sent += 1
        status = int(response.status_code)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if what.split(" ", 1)[0].upper() in ("POST", "PUT", "PATCH", "DELETE"):
            self.write_statuses[status] = self.write_statuses.get(status, 0) + 1
        if status < 500:
            return
        # documented answers about the moment, not failures of the input's handling; anything else >= 500 is
        text = response.text if isinstance(response.text, str) else str(response.text)
        try:
            code = json.loads(text).get("code")
        except (ValueError, AttributeError):
            code = None
        if code in DOCUMENTED_5XX:
            return
        self.server_errors.append(f"{what} → {status}: {text[:300]}")


@pytest.fixture(scope="module")
def fuzz(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Objects]]:
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=60)
    objects = Objects(client)
    objects.snapshot()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("gunicorn-fuzz") / "server.log"
    proc = None
    try:
        objects.ensure()
        env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state-fuzz")),
                           SERVICE_OPERATIONS_LEVEL="3", SERVICE_WRITES_MAX_REPLICAS="2")
        proc = launch_gunicorn(env, log_path, base)
        wait_for(lambda: requests.get(f"{base}/services/{objects.ids['service']}", timeout=5).status_code == 200,
                 20, message="the fuzz service cached")
        yield base, objects
    finally:
        objects.clean()
        if proc is not None:
            stop_gunicorn(proc, log_path)   # asserts no traceback in the server's log either
        client.close()


def fuzzed(method: str, path: str) -> bool:
    if method == "GET" or method in ("OPTIONS", "HEAD"):
        return True
    return not path.startswith(EXCLUDED_PREFIXES) and (method, path) not in EXCLUDED


def _order(operation: Any) -> tuple[int, int, str]:
    method = operation.method.upper()
    is_stack = operation.path.startswith("/stacks")
    return (method == "DELETE", is_stack, operation.path)


def test_no_write_body_or_query_parameter_reaches_a_server_error(fuzz: tuple[str, Objects]) -> None:
    base, objects = fuzz
    tally = Tally()
    schema = schemathesis.openapi.from_url(f"{base}/api")
    operations = sorted((result.ok() for result in schema.get_all_operations()), key=_order)
    operations = [op for op in operations if fuzzed(op.method.upper(), op.path)]
    writes = [op for op in operations if op.method.upper() not in ("GET", "HEAD", "OPTIONS")]
    assert len(writes) >= 40, "every write of the table (but the swarm/plugin/node-membership ones) is fuzzed"
    started = time.monotonic()
    session = requests.Session()
    for operation in operations:
        objects.ensure()
        method = operation.method.upper()
        late = time.monotonic() - started > PHASE_ONE_SECONDS
        count = 1 if late else WRITE_EXAMPLES if method not in ("GET", "OPTIONS") else READ_EXAMPLES
        generated(base, operation, objects.pinned(operation.path), count, tally, session)()
    phase_one = tally.sent
    hostile_writes(base, objects, writes, tally, session)
    hostile_queries(base, objects, operations, tally, session)
    elapsed = time.monotonic() - started
    print(f"fuzz: {tally.sent} requests ({phase_one} generated), {elapsed:.0f}s, "
          f"statuses {sorted(tally.statuses.items())}, of writes {sorted(tally.write_statuses.items())}")
    assert not tally.server_errors, "\n".join(tally.server_errors[:20])
    assert tally.sent >= 500 and tally.write_statuses.get(200, 0) >= 20 and tally.write_statuses.get(400, 0) >= 100
    assert elapsed < 300


def generated(base: str, operation: Any, pin: str | None, count: int, tally: Tally,
              session: requests.Session) -> Callable[[], None]:
    """``count`` schemathesis cases of one operation, path parameters pinned, sent and tallied."""
    @given(case=operation.as_strategy())
    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def send(case: Any) -> None:
        if pin is not None and case.path_parameters:
            case.path_parameters = dict.fromkeys(case.path_parameters, pin)
        driver = DRIVERS.get(case.operation.path)
        if driver and isinstance(case.body, dict) and "driver" in case.body:
            case.body = {**case.body, "driver": driver}
        headers = {"Accept": "application/json"} if case.method.upper() == "GET" else {}
        response = case.call(base_url=base, session=session, headers=headers, timeout=REQUEST_TIMEOUT)
        tally.record(f"{case.method} {case.formatted_path} {case.query} {str(case.body)[:200]}", response)

    return send


# ---------------------------------------------------------------------------------------------- hostile values
HOSTILE_BODIES: list[bytes] = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 3_000 + b"1" + b"}" * 3_000,
    json.dumps({"\u0000": "\u0000", "A\u0000B": "v", "labels": {"k\u0000": "v"}, "env": {"A\u0000": "1"}}).encode(),
    b'{"replicas": 1e400, "image": "\\ud800", "name": "\\udfff", "labels": {"\\ud800": "x"}}',
    b'{"replicas": 100000000000000000000000000000, "limits": {"memoryBytes": -1e308}}',
    b'[{"op": "move", "from": "/a", "path": "/a/b"}, {"op": "copy", "from": "/x", "path": "/-"}]',
    b'[{"op": "test", "path": "", "value": null}, {"op": "add", "path": "/~2", "value": {}}]',
    b"\xff\xfe\x00{",
    b"null", b'""', b"[]", b"0",
]
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                  max_size=4), max_leaves=20)


def hostile_writes(base: str, objects: Objects, writes: list[Any], tally: Tally, session: requests.Session) -> None:
    for operation in writes:
        objects.ensure()
        method = operation.method.upper()
        if method == "DELETE":
            continue
        pin = objects.pinned(operation.path)
        url = base + operation.path.replace("{id}", pin or "x").replace("{name}", pin or "x")
        types = [media for media in ("application/json", "application/json-patch+json", "application/merge-patch+json")
                 if method != "PATCH" or media != "application/json"]
        for index, body in enumerate(HOSTILE_BODIES):
            media = types[index % len(types)]
            response = session.request(method, url, data=body, headers={"Content-Type": media},
                                       timeout=REQUEST_TIMEOUT)
            tally.record(f"{method} {url} {media} {body[:80]!r}", response)

        random_documents(method, url, tally, session)()


def random_documents(method: str, url: str, tally: Tally, session: requests.Session) -> Callable[[], None]:
    """A few arbitrary JSON documents (hypothesis) as the body of one write."""
    media = "application/merge-patch+json" if method == "PATCH" else "application/json"

    @given(document=_JSON)
    @settings(max_examples=4, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    def send(document: Any) -> None:
        response = session.request(method, url, data=json.dumps(document), headers={"Content-Type": media},
                                   timeout=REQUEST_TIMEOUT)
        tally.record(f"{method} {url} {json.dumps(document)[:120]}", response)

    return send


HOSTILE_QUERIES = ["100000000h", "9" * 400 + "h", "2026-01-01T00:00:00+99:99", "0000-01-01T00:00:00Z",
                   "9999-12-31T23:59:59-23:59", "\u0000", "-1", "1e309", "9" * 5000, "🙂", "", "%", "a" * 3000]


def hostile_queries(base: str, objects: Objects, operations: list[Any], tally: Tally,
                    session: requests.Session) -> None:
    for operation in operations:
        if operation.method.upper() != "GET":
            continue
        names = [parameter.name for parameter in operation.query]
        if not names:
            continue
        pin = objects.pinned(operation.path) or "x"
        path = operation.path
        for placeholder in ("{id}", "{name}", "{service_id}", "{task_id}"):
            path = path.replace(placeholder, pin)
        for name in names:
            for value in HOSTILE_QUERIES:
                response = session.get(base + path, params={name: value}, headers={"Accept": "application/json"},
                                       timeout=REQUEST_TIMEOUT)
                tally.record(f"GET {path}?{name}={value[:40]!r}", response)
            raw = session.get(f"{base}{path}?{name}=%ED%A0%80%FF", headers={"Accept": "application/json"},
                              timeout=REQUEST_TIMEOUT)          # invalid UTF-8 in the query
            tally.record(f"GET {path}?{name}=<invalid utf-8>", raw)
