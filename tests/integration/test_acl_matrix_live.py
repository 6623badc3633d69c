"""The ACL matrix against a real gunicorn on the lab (docs/acl.md): five users, their grants and
every kind of endpoint (lists, details, SSE streams, Atom feeds, search, history, writes, whoami/profile),
asserting exactly who sees and changes what, and that no response (body, headers, stream or feed text)
carries the name of anything its caller may not read.

Policy (mode ``headers`` behind a trusted 127.0.0.1 "proxy", operations level 3):

- alice: read ``stack:demo`` and ``stack:<N>`` (N: this test's own stack namespace)
- bob: read + write ``service:<N>_web``
- carol (group ``ops``): read ``stack:ops``, write ``stack:<N>``
- dave: nothing
- erin: read + write ``*``

The test's own objects: services ``<N>_web`` and ``<N>_api`` (labelled with stack namespace N) and
``<N>-solo`` (no stack), busybox sleepers removed at teardown. Demo objects are only read. Changes for the
streams are made through the docker SDK (labels); writes through Shoal change labels only.
"""

from __future__ import annotations

import contextlib
import json
import re
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

STACK_LABEL = "com.docker.stack.namespace"
MERGE = "application/merge-patch+json"
N = f"taclw{uuid.uuid4().hex[:6]}"
WEB, API, SOLO = f"{N}_web", f"{N}_api", f"{N}-solo"
USERS: dict[str, dict[str, str]] = {
    "alice": {"X-User": "alice"},
    "bob": {"X-User": "bob"},
    "carol": {"X-User": "carol", "X-Groups": "ops"},
    "dave": {"X-User": "dave"},
    "erin": {"X-User": "erin"},
}
POLICY = {"grants": [
    {"resources": ["stack:demo", f"stack:{N}"], "audience": ["user:alice"], "permissions": ["read"]},
    {"resources": [f"service:{WEB}"], "audience": ["user:bob"], "permissions": ["read", "write"]},
    {"resources": ["stack:ops"], "audience": ["group:ops"], "permissions": ["read"]},
    {"resources": [f"stack:{N}"], "audience": ["group:ops"], "permissions": ["write"]},
    {"resources": ["*"], "audience": ["user:erin"], "permissions": ["read", "write"]},
]}
PERMISSIONS = {
    "alice": {"stack:demo": ["read"], f"stack:{N}": ["read"]},
    "bob": {f"service:{WEB}": ["read", "write"]},
    "carol": {"stack:ops": ["read"], f"stack:{N}": ["read", "write"]},
    "dave": {},
    "erin": {"*": ["read", "write"]},
}

# The lab's objects by name (scripts/lab-swarm, scripts/lab/*.yml).
DEMO = {"demo_web", "demo_api", "demo_ticker", "demo_crasher", "demo_pending", "demo_app_cfg", "demo_app_secret",
        "demo_backend", "demo_frontend", "demo_data"}
OPS = {"ops_agent", "ops_probe", "ops_sick", "ops_agent_cfg", "ops_token", "ops_mesh", "ops_cache"}
STANDALONE = {"solo", "solo-global", "solo-job", "shared-motd", "spare-cfg", "shared-token", "shared-net",
              "scratch", "shoal-n1"}
DEMO_SERVICES = {"demo_web", "demo_api", "demo_ticker", "demo_crasher", "demo_pending"}
OPS_SERVICES = {"ops_agent", "ops_probe", "ops_sick"}
# Services each user may read (exact, among the lab's and this test's services).
READABLE_SERVICES = {
    "alice": DEMO_SERVICES | {WEB, API},
    "bob": {WEB},
    "carol": OPS_SERVICES | {WEB, API},
    "dave": set(),
}
KNOWN_SERVICES = DEMO_SERVICES | OPS_SERVICES | {"solo", "solo-global", "solo-job", WEB, API, SOLO}


def forbidden_names(user: str, ids: dict[str, str]) -> set[str]:
    """Names (and this test's service ids) the user may not read. A stack's name is visible through its
    members' namespace label, so it is forbidden only when no member is readable. The ops stack uses the
    demo stack's network ``demo_frontend`` (external): carol's ops services and tasks embed it, and the
    redaction of embedded references (``app.acl.redact``) keeps only its id, so it is forbidden too."""
    everything = DEMO | OPS | STANDALONE | {"demo", "ops", N, WEB, API, SOLO}
    allowed: set[str] = {
        "alice": DEMO | {"demo", N, WEB, API},
        "bob": {N, WEB},
        "carol": OPS | {"ops", N, WEB, API},
        "dave": set(),
        "erin": everything,
    }[user]
    names = everything - allowed
    return names | {ids[name] for name in names if name in ids}


def pattern(names: set[str]) -> re.Pattern[str] | None:
    if not names:
        return None
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_.-])(?:{alternatives})(?![A-Za-z0-9_-])")


@dataclass
class Matrix:
    base: str
    ids: dict[str, str]
    log_path: Path
    checked: dict[str, int] = field(default_factory=dict)   # user → responses searched

    def clean(self, user: str, where: str, text: str, sent: str = "") -> None:
        """No forbidden name in ``text`` (a body, a header block, a stream's bytes), except what the caller
        sent itself (an id in the URL it asked for)."""
        found = pattern({name for name in forbidden_names(user, self.ids) if name not in sent})
        if found is not None:
            match = found.search(text)
            assert match is None, (f"{user}: {where} carries {match.group(0)!r}: "
                                   f"...{text[max(0, match.start() - 200):match.end() + 200]}...")
        self.checked[user] = self.checked.get(user, 0) + 1

    def request(self, user: str | None, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Accept": "application/json", **(USERS[user] if user else {}), **kwargs.pop("headers", {})}
        response = requests.request(method, f"{self.base}{path}", headers=headers, timeout=30, **kwargs)
        if user is not None:
            where = f"{method} {path} → {response.status_code}"
            self.clean(user, where + " headers", "\n".join(f"{k}: {v}" for k, v in response.headers.items()), path)
            self.clean(user, where + " body", response.text, path)
        return response

    def get(self, user: str, path: str, **kwargs: Any) -> requests.Response:
        return self.request(user, "GET", path, **kwargs)

    def all_items(self, user: str, path: str) -> list[dict[str, Any]]:
        """Every page of a list (at most 20 pages of 200)."""
        items: list[dict[str, Any]] = []
        for page in range(20):
            sep = "&" if "?" in path else "?"
            response = self.get(user, f"{path}{sep}limit=200&offset={page * 200}")
            assert response.status_code == 200, response.text[:300]
            body = response.json()
            items += body["items"]
            if len(items) >= body["total"] or not body["items"]:
                return items
        raise AssertionError(f"{path}: more than 20 pages")


def service_names(items: list[dict[str, Any]]) -> set[str]:
    return {item["Spec"]["Name"] for item in items}


@pytest.fixture(scope="module")
def matrix(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    client = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    made: list[Any] = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("gunicorn-acl") / "server.log"
    proc = None
    try:
        made.append(sleeper(client, WEB, labels={STACK_LABEL: N}))
        made.append(sleeper(client, API, labels={STACK_LABEL: N}))
        made.append(sleeper(client, SOLO))
        env = gunicorn_env(docker_host, port, SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state-acl")),
                           SERVICE_AUTH_MODE="headers", SERVICE_TRUSTED_PROXIES="127.0.0.1/32",
                           SERVICE_AUTH_HEADERS_SUBJECT="X-User", SERVICE_AUTH_HEADERS_GROUPS="X-Groups",
                           SERVICE_ACL_POLICY=json.dumps(POLICY), SERVICE_OPERATIONS_LEVEL="3",
                           SERVICE_SSE_KEEPALIVE="1s")
        proc = launch_gunicorn(env, log_path, base)
        ids = {service.name: service.id for service in made}
        matrix = Matrix(base, ids, log_path)
        wait_for(lambda: {WEB, API, SOLO} <= service_names(matrix.all_items("erin", "/services")), 20,
                 message="the test's services cached")
        yield matrix
    finally:
        for service in made:
            with contextlib.suppress(docker.errors.NotFound):
                service.remove()
        if proc is not None:
            stop_gunicorn(proc, log_path)
        client.close()


# ---------------------------------------------------------------------------------------------- identity
def test_whoami_and_profile_name_the_caller_and_its_permissions(matrix: Matrix) -> None:
    for user in USERS:
        for path, kind in (("/auth/whoami", "Identity"), ("/profile", "Profile")):
            response = matrix.get(user, path)
            body = response.json()
            assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
            assert body["@type"] == kind and body["subject"] == user and body["provider"] == "headers"
            assert body["permissions"] == PERMISSIONS[user], (user, body)
            assert {"Authorization", "Cookie"} <= {v.strip() for v in response.headers["Vary"].split(",")}
    assert matrix.get("carol", "/auth/whoami").json()["groups"] == ["ops"]
    for path in ("/auth/whoami", "/profile", "/services"):
        assert matrix.request(None, "GET", path).status_code == 401


# ---------------------------------------------------------------------------------------------- reads
def test_lists_show_exactly_the_readable_objects(matrix: Matrix) -> None:
    for user, expected in READABLE_SERVICES.items():
        seen = service_names(matrix.all_items(user, "/services")) & KNOWN_SERVICES
        assert seen == expected, (user, seen ^ expected)
        task_services = {task["ServiceName"] for task in matrix.all_items(user, "/tasks")}
        assert task_services <= expected and (WEB in task_services) is (WEB in expected), (user, task_services)
        for kind in ("stacks", "configs", "secrets", "networks", "volumes", "nodes"):
            matrix.all_items(user, f"/{kind}")   # searched for forbidden names by the helper
    everything = service_names(matrix.all_items("erin", "/services"))
    assert everything >= KNOWN_SERVICES
    stacks = {item["name"] for item in matrix.all_items("alice", "/stacks")}
    assert {"demo", N} <= stacks and "ops" not in stacks
    assert {item["name"] for item in matrix.all_items("carol", "/stacks")} >= {"ops", N}
    assert matrix.all_items("dave", "/services") == [] and matrix.all_items("dave", "/stacks") == []


def test_lists_vary_by_user_and_their_etags_differ(matrix: Matrix) -> None:
    tags = {user: matrix.get(user, "/services?limit=200").headers["ETag"] for user in ("alice", "bob", "carol")}
    assert len(set(tags.values())) == 3, tags
    assert "Authorization" in matrix.get("bob", "/services").headers["Vary"]


def test_details_are_readable_exactly_per_grant(matrix: Matrix) -> None:
    for user, readable in READABLE_SERVICES.items():
        for name in (WEB, API, SOLO):
            response = matrix.get(user, f"/services/{matrix.ids[name]}")
            if name in readable:
                assert response.status_code == 200, (user, name, response.text[:300])
            else:
                assert response.status_code == 403, (user, name, response.status_code)
                assert response.json()["code"] == "ACL001"
                assert response.json()["resource"] == f"service:{matrix.ids[name]}"
    assert matrix.get("erin", f"/services/{matrix.ids[SOLO]}").status_code == 200


def test_search_history_and_feeds_carry_only_readable_objects(matrix: Matrix) -> None:
    expected = {"alice": {WEB, API}, "bob": {WEB}, "carol": {WEB, API}, "erin": {WEB, API, SOLO}}
    for user, names in expected.items():
        response = matrix.get(user, f"/search?q={N}&limit=1000")
        assert response.status_code == 200, response.text[:300]
        found = {item["name"] for item in response.json()["results"].get("services", [])}
        assert found == names, (user, found)
        assert matrix.get(user, "/history?limit=200").status_code == 200
        for feed in ("/events.atom", "/services.atom?limit=200", "/history.atom?limit=200"):
            answer = matrix.get(user, feed, headers={"Accept": "application/atom+xml"})
            assert answer.status_code == 200, (user, feed, answer.status_code)
    dave = matrix.get("dave", f"/search?q={N}")
    assert dave.status_code == 403 and dave.json()["code"] == "ACL001"   # cluster-wide: needs a grant


# ---------------------------------------------------------------------------------------------- streams
@dataclass
class Stream:
    user: str
    path: str
    response: requests.Response
    data: bytearray = field(default_factory=bytearray)

    def read(self, seconds: float) -> None:
        with gevent.Timeout(seconds, False):
            for chunk in self.response.iter_content(chunk_size=None):
                self.data += chunk


def open_stream(matrix: Matrix, user: str, path: str) -> Stream:
    response = requests.get(f"{matrix.base}{path}", headers={**USERS[user], "Accept": "text/event-stream"},
                            stream=True, timeout=(5, 30))
    assert response.status_code == 200, (user, path, response.status_code)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return Stream(user, path, response)


def test_streams_deliver_only_readable_events(matrix: Matrix, docker_host: str) -> None:
    client: Any = docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)
    streams = [open_stream(matrix, user, path) for user in USERS for path in ("/events", "/services")]
    readers = [gevent.spawn(stream.read, 8.0) for stream in streams]
    try:
        wait_for(lambda: all(stream.data for stream in streams), 10, interval=0.02,
                 message="every stream registered (its first frame read)")
        stamp = str(int(time.time()))
        for name in (WEB, API, SOLO):
            client.services.get(matrix.ids[name]).update(labels={
                "shoal.test": "1", "t-aclw": stamp, **({STACK_LABEL: N} if name != SOLO else {})})
        gevent.joinall(readers, timeout=15)
    finally:
        for stream in streams:
            stream.response.close()
        client.close()
    expected = {"alice": {WEB, API}, "bob": {WEB}, "carol": {WEB, API}, "dave": set(), "erin": {WEB, API, SOLO}}
    for stream in streams:
        text = stream.data.decode(errors="replace")
        matrix.clean(stream.user, f"stream {stream.path}", text)
        got = {name for name in (WEB, API, SOLO) if f'"Name":"{name}"' in text}
        assert got == expected[stream.user], (stream.user, stream.path, got, text[-500:])
        if stream.user == "dave":
            assert "event: service" not in text and "event: batch" not in text


# ---------------------------------------------------------------------------------------------- writes
def patch_labels(matrix: Matrix, user: str, name: str) -> requests.Response:
    return matrix.request(user, "PATCH", f"/services/{matrix.ids[name]}/labels",
                          data=json.dumps({"t-aclw-by": user}), headers={"Content-Type": MERGE})


def test_writes_pass_exactly_for_the_writers(matrix: Matrix, engine: Any) -> None:
    writers = {WEB: {"bob", "carol", "erin"}, API: {"carol", "erin"}, SOLO: {"erin"}}
    readers = {WEB: {"alice", "bob", "carol", "erin"}, API: {"alice", "carol", "erin"}, SOLO: {"erin"}}
    for name, allowed in writers.items():
        for user in USERS:
            response = patch_labels(matrix, user, name)
            if user in allowed:
                assert response.status_code == 200, (user, name, response.text[:300])
                labels = engine.inspect_service(matrix.ids[name])["Spec"]["Labels"]
                assert labels["t-aclw-by"] == user and (name == SOLO or labels[STACK_LABEL] == N)
            else:
                body = response.json()
                assert response.status_code == 403 and body["code"] == "ACL002", (user, name, body)
                shown = name if user in readers[name] else matrix.ids[name]
                assert body["resource"] == f"service:{shown}" and body["permission"] == "write"


def test_allow_and_accept_patch_follow_the_write_permission(matrix: Matrix) -> None:
    web = matrix.ids[WEB]
    for user in ("alice", "bob", "carol", "erin"):
        writes = user != "alice"
        allow = {m.strip() for m in matrix.get(user, f"/services/{web}").headers["Allow"].split(",")}
        assert ("DELETE" in allow) is writes and {"GET", "HEAD"} <= allow, (user, allow)
        sub = matrix.get(user, f"/services/{web}/labels")
        assert ("Accept-Patch" in sub.headers) is writes, (user, dict(sub.headers))


def test_join_tokens_only_for_swarm_writers(matrix: Matrix) -> None:
    tokens = matrix.get("erin", "/swarm").json()["swarm"]["JoinTokens"]
    assert tokens["Worker"] and tokens["Manager"]
    for user in ("alice", "carol"):
        answer = matrix.get(user, "/swarm")
        assert answer.status_code == 200
        assert answer.json()["swarm"]["JoinTokens"] == {"Worker": "", "Manager": ""}
        assert tokens["Worker"] not in answer.text
    assert matrix.get("dave", "/swarm").status_code == 403


# ---------------------------------------------------------------------------------------------- cluster-wide
CLUSTER_WIDE = ["/cluster", "/cluster/capacity", "/cluster/metrics", "/disk-usage", "/swarm", "/stacks/summary",
                "/topology", "/topology.dot", "/topology.graphml", "/topology/networks", "/topology/placement",
                "/recommendations", "/recommendations.atom", "/search?q=demo&limit=1000",
                "/search?q=ops&limit=1000", "/search?q=shoal&limit=1000", "/history?limit=200",
                "/history.atom?limit=200", "/history.feed.json?limit=200", "/events.atom?limit=200"]


def node_ids(matrix: Matrix) -> dict[str, str]:
    return {node["Description"]["Hostname"]: node["ID"] for node in matrix.all_items("erin", "/nodes")}


def test_cluster_wide_reads_name_nothing_hidden(matrix: Matrix) -> None:
    """Every cluster-wide read, for every user: dave (no grant) is refused; the others get answers whose
    bodies and headers name nothing they may not read (no node grant: no hostname; and no node id in the
    cluster documents, where an id would stand for the node itself: elsewhere a task's NodeID stays, as
    every id does, docs/acl.md)."""
    nodes = node_ids(matrix)
    assert nodes
    for url in CLUSTER_WIDE:
        refused = matrix.get("dave", url)
        assert refused.status_code == 403 and refused.json()["code"] == "ACL001", (url, refused.status_code)
        for user in ("alice", "bob", "carol", "erin"):
            answer = matrix.get(user, url)
            assert answer.status_code in (200, 503), (user, url, answer.status_code, answer.text[:300])
            if user != "erin":   # no node grant: no hostname anywhere, no node id where it names the node
                named = (*nodes, *nodes.values()) if url.startswith("/cluster") else tuple(nodes)
                leaked = [n for n in named if n in answer.text]
                assert not leaked, (user, url, leaked)
    assert matrix.get("erin", "/cluster/metrics").status_code == 503   # no Prometheus: MTR001, still gated


def test_capacity_covers_the_readable_nodes_only(matrix: Matrix) -> None:
    nodes = node_ids(matrix)
    everything = matrix.get("erin", "/cluster/capacity").json()
    assert {(row["hostname"], row["id"]) for row in everything["nodes"]} == set(nodes.items())
    assert everything["nodeCount"] == len(nodes) and everything["totalMemory"] > 0
    for user in ("alice", "bob", "carol"):      # grants, but none on a node
        body = matrix.get(user, "/cluster/capacity").json()
        assert body["nodes"] == [] and body["nodeCount"] == 0 and body["totalMemory"] == 0, (user, body)


# ---------------------------------------------------------------------------------------------- history
def test_every_history_url_per_user(matrix: Matrix) -> None:
    """/history, /history/{seq} of readable and hidden records, and the feeds of the test's services: a
    hidden record is 403 ACL001 naming the entry (``history:<seq>``), never its kind or object."""
    records = [item for item in matrix.get("erin", "/history?limit=200").json()["items"]
               if item["resourceId"] in {matrix.ids[name] for name in (WEB, API, SOLO)}]
    by_id = {matrix.ids[name]: name for name in (WEB, API, SOLO)}
    assert {by_id[item["resourceId"]] for item in records} == {WEB, API, SOLO}, records
    for user, readable in READABLE_SERVICES.items():
        listed = {item["resourceId"] for item in matrix.get(user, "/history?limit=200").json()["items"]} \
            if user != "dave" else set()
        for record in records:
            answer = matrix.get(user, f"/history/{record['id']}")
            name = by_id[record["resourceId"]]
            if name in readable:
                assert answer.status_code == 200 and answer.json()["resourceId"] == record["resourceId"]
                assert record["resourceId"] in listed
            else:
                body = answer.json()
                assert answer.status_code == 403 and body["code"] == "ACL001", (user, name, body)
                assert body["resource"] == f"history:{record['id']}" and "service" not in answer.text
                assert record["resourceId"] not in listed
        for name in (WEB, API, SOLO):
            feed = matrix.get(user, f"/services/{matrix.ids[name]}.atom")
            assert feed.status_code == (200 if name in readable else 403), (user, name, feed.status_code)
            assert matrix.get(user, "/services.atom?limit=200").status_code == 200


# ---------------------------------------------------------------------------------------------- OPTIONS
def option_urls(matrix: Matrix) -> list[str]:
    web, node = matrix.ids[WEB], next(iter(node_ids(matrix).values()))
    seq = matrix.get("erin", "/history?limit=1").json()["items"][0]["id"]
    return ["/services", f"/services/{web}", f"/services/{web}/labels", f"/services/{web}/scale",
            f"/services/{web}/rollback", f"/services/{web}/tasks", "/tasks", f"/nodes/{node}",
            f"/nodes/{node}/availability", "/configs", "/secrets", f"/stacks/{N}", "/cluster", "/cluster/capacity",
            "/history", f"/history/{seq}", "/events", "/search", "/recommendations", "/swarm", "/topology"]


def test_options_is_authenticated_and_the_callers_own(matrix: Matrix) -> None:
    """OPTIONS on every URL kind: 401 without credentials, and an Allow that lists a write only for a
    caller who may make it (the same list as a GET of the URL)."""
    web = matrix.ids[WEB]
    for url in option_urls(matrix):
        anonymous = matrix.request(None, "OPTIONS", url)
        assert anonymous.status_code == 401 and "Allow" not in anonymous.headers, (url, anonymous.status_code)
        for user in USERS:
            answer = matrix.request(user, "OPTIONS", url)
            assert answer.status_code == 200, (user, url, answer.status_code, answer.text[:200])
            allow = {m.strip() for m in answer.headers["Allow"].split(",") if m.strip()}
            if user in ("alice", "dave"):        # readers and nobody: never a write method
                assert allow <= {"GET", "HEAD"}, (user, url, allow)
                assert "Accept-Patch" not in answer.headers
            get = matrix.get(user, url)
            if get.status_code == 200 and "text/event-stream" not in get.headers.get("Content-Type", ""):
                assert answer.headers["Allow"] == get.headers["Allow"], (user, url)
                assert answer.headers.get("Accept-Patch") == get.headers.get("Accept-Patch"), (user, url)
    assert "DELETE" in matrix.request("bob", "OPTIONS", f"/services/{web}").headers["Allow"]
    assert matrix.request("bob", "OPTIONS", f"/services/{web}/scale").headers["Allow"] == "PUT"
    assert matrix.request("alice", "OPTIONS", f"/services/{web}/scale").headers["Allow"] == ""
    assert "PATCH" in matrix.request("carol", "OPTIONS", f"/services/{web}/labels").headers["Allow"]


def test_every_response_was_searched(matrix: Matrix) -> None:
    assert all(matrix.checked.get(user, 0) >= 20 for user in USERS), matrix.checked
