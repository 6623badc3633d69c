"""A deterministic synthetic Swarm snapshot in the Docker Engine API 1.41 JSON shape.

The benchmarks need a cluster far bigger than the lab swarm (100 nodes, 1000 services, 10k-50k tasks)
whose objects are as large and as nested as real ones, because the cost of a list request is dominated
by walking, copying and serialising the engine JSON the cache stores. Everything is derived from one
seeded ``random.Random``, so two runs with the same parameters produce byte-identical snapshots.

Task states follow a plausible history: each replica slot has one current task (mostly running, a few
pending or failed while restarting) plus older tasks kept by the task history retention (shutdown,
failed, complete). Global services get one task per node and no slot, as the engine does.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.resources import STACK_LABEL, ResourceKind

Raw = dict[str, Any]
Snapshot = dict[ResourceKind, list[Raw]]

_ID_ALPHABET = string.ascii_lowercase + string.digits
_EPOCH = datetime(2025, 3, 1, 8, 0, 0, tzinfo=UTC)
_IMAGES = ("nginx:1.27", "redis:7.2", "postgres:16", "traefik:v3.1", "grafana/grafana:11.1.0",
           "prom/prometheus:v2.53.0", "registry.example.com/shop/api:2.14.3",
           "registry.example.com/shop/web:2.14.3", "registry.example.com/ops/agent:0.9.1",
           "busybox:1.36")
_WORDS = ("api", "web", "worker", "cache", "db", "queue", "auth", "billing", "search", "mailer",
          "gateway", "metrics", "logs", "cron", "proxy", "static", "ingest", "report", "notify", "admin")
# Current task of a slot: state, weight. History tasks (superseded by a newer one in the same slot).
_CURRENT_STATES = (("running", 95), ("pending", 2.5), ("failed", 2.5))
_HISTORY_STATES = (("shutdown", 55), ("failed", 30), ("complete", 15))
_FAILURES = ("task: non-zero exit (1)", "task: non-zero exit (137)", "task: non-zero exit (2)",
             "starting container failed: OCI runtime create failed")
_PENDING_MESSAGES = ("no suitable node (insufficient resources on 100 nodes)", "pending task scheduling")


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """Sizes of the synthetic cluster; the defaults are the benchmark's reference cluster."""

    nodes: int = 100
    services: int = 1000
    tasks: int = 10_000
    seed: int = 20250301
    managers: int = 5
    stacks: int = 100
    configs: int = 300
    secrets: int = 200
    volumes: int = 200


class _Ids:
    """Engine-shaped identifiers from the shared generator (25-char swarm ids, 64-hex container ids)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def swarm(self) -> str:
        return "".join(self._rng.choices(_ID_ALPHABET, k=25))

    def hex64(self) -> str:
        return f"{self._rng.getrandbits(256):064x}"


def _stamp(seconds: float) -> str:
    """Engine timestamp with nanoseconds, e.g. ``2025-03-01T08:00:01.123456789Z``."""
    moment = _EPOCH + timedelta(seconds=int(seconds))
    nanos = int((seconds % 1) * 1e9)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


@dataclass(slots=True)
class _Context:
    rng: random.Random
    ids: _Ids
    shape: ClusterShape
    version: int = 10

    def next_version(self) -> int:
        self.version += self.rng.randint(1, 7)
        return self.version

    def when(self, low: float = 0, high: float = 30 * 86400) -> float:
        return self.rng.uniform(low, high)


def build_snapshot(shape: ClusterShape | None = None) -> Snapshot:
    """The whole cluster as ``Cache.replace_all`` takes it (the engine listing of every kind)."""
    shape = shape or ClusterShape()
    rng = random.Random(shape.seed)
    ctx = _Context(rng, _Ids(rng), shape)
    stacks = [f"{rng.choice(_WORDS)}{index:03d}" for index in range(shape.stacks)]
    nodes = [_node(ctx, index) for index in range(shape.nodes)]
    networks = _networks(ctx, stacks)
    configs = [_config_like(ctx, "config", index, stacks) for index in range(shape.configs)]
    secrets = [_config_like(ctx, "secret", index, stacks) for index in range(shape.secrets)]
    volumes = [_volume(ctx, index, stacks) for index in range(shape.volumes)]
    services = [_service(ctx, index, stacks, networks, configs, secrets, volumes)
                for index in range(shape.services)]
    tasks = _tasks(ctx, services, nodes, networks)
    return {
        ResourceKind.NODE: nodes, ResourceKind.SERVICE: services, ResourceKind.TASK: tasks,
        ResourceKind.CONFIG: configs, ResourceKind.SECRET: secrets,
        ResourceKind.NETWORK: networks, ResourceKind.VOLUME: volumes,
    }


# ---------------------------------------------------------------- nodes
def _node(ctx: _Context, index: int) -> Raw:
    rng, manager = ctx.rng, index < ctx.shape.managers
    created = ctx.when(0, 3600)
    address = f"10.0.{index // 250}.{index % 250 + 2}"
    state = "down" if rng.random() < 0.03 else "ready"
    availability = "drain" if rng.random() < 0.04 else ("pause" if rng.random() < 0.01 else "active")
    raw: Raw = {
        "ID": ctx.ids.swarm(),
        "Version": {"Index": ctx.next_version()},
        "CreatedAt": _stamp(created), "UpdatedAt": _stamp(ctx.when(created, 30 * 86400)),
        "Spec": {"Labels": {"zone": f"eu-{index % 3 + 1}"}, "Role": "manager" if manager else "worker",
                 "Availability": availability},
        "Description": {
            "Hostname": f"swarm-{'mgr' if manager else 'wrk'}-{index:03d}",
            "Platform": {"Architecture": "x86_64", "OS": "linux"},
            "Resources": {"NanoCPUs": 8_000_000_000, "MemoryBytes": 33_554_432_000},
            "Engine": {"EngineVersion": "24.0.9", "Plugins": [
                {"Type": "Log", "Name": name} for name in ("json-file", "journald", "local")] + [
                {"Type": "Network", "Name": name} for name in ("bridge", "host", "overlay")] + [
                {"Type": "Volume", "Name": "local"}]},
            "TLSInfo": {"TrustRoot": "-----BEGIN CERTIFICATE-----\nMIIBazCCARCgAwIBAgIU...\n"
                                     "-----END CERTIFICATE-----\n",
                        "CertIssuerSubject": "MBMxETAPBgNVBAMTCHN3YXJtLWNh",
                        "CertIssuerPublicKey": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE..."},
        },
        "Status": {"State": state, "Addr": address},
    }
    if manager:
        raw["ManagerStatus"] = {"Leader": index == 0, "Reachability": "reachable",
                                "Addr": f"{address}:2377"}
    return raw


# ---------------------------------------------------------------- networks
def _networks(ctx: _Context, stacks: list[str]) -> list[Raw]:
    """Ingress, the local networks of a manager, and one overlay per stack."""
    ingress = _overlay(ctx, "ingress", "10.255.0.0/16", ingress=True)
    local = [_local_network(ctx, name, driver) for name, driver in
             (("bridge", "bridge"), ("host", "host"), ("none", "null"), ("docker_gwbridge", "bridge"))]
    overlays = [_overlay(ctx, f"{stack}_default", f"10.{10 + i // 256}.{i % 256}.0/24", stack=stack)
                for i, stack in enumerate(stacks)]
    return [ingress, *local, *overlays]


def _overlay(ctx: _Context, name: str, subnet: str, *, ingress: bool = False, stack: str = "") -> Raw:
    gateway = subnet.rsplit(".", 1)[0] + ".1"
    return {
        "Name": name, "Id": ctx.ids.swarm(), "Created": _stamp(ctx.when(0, 86400)), "Scope": "swarm",
        "Driver": "overlay", "EnableIPv6": False,
        "IPAM": {"Driver": "default", "Options": None, "Config": [{"Subnet": subnet, "Gateway": gateway}]},
        "Internal": False, "Attachable": not ingress, "Ingress": ingress, "ConfigFrom": {"Network": ""},
        "ConfigOnly": False, "Containers": None,
        "Options": {"com.docker.network.driver.overlay.vxlanid_list": str(4096 + ctx.rng.randint(1, 9999))},
        "Labels": {STACK_LABEL: stack} if stack else {},
    }


def _local_network(ctx: _Context, name: str, driver: str) -> Raw:
    return {
        "Name": name, "Id": ctx.ids.hex64(), "Created": _stamp(ctx.when(0, 3600)), "Scope": "local",
        "Driver": driver, "EnableIPv6": False, "IPAM": {"Driver": "default", "Options": None, "Config": []},
        "Internal": False, "Attachable": False, "Ingress": False, "ConfigFrom": {"Network": ""},
        "ConfigOnly": False, "Containers": {}, "Options": {}, "Labels": {},
    }


# ---------------------------------------------------------------- configs, volumes
def _config_like(ctx: _Context, what: str, index: int, stacks: list[str]) -> Raw:
    stack = stacks[index % len(stacks)]
    created = ctx.when()
    spec: Raw = {"Name": f"{stack}_{ctx.rng.choice(_WORDS)}_{what}_{index}", "Labels": {STACK_LABEL: stack}}
    if what == "config":
        spec["Data"] = "c2VydmVyIHsKICBsaXN0ZW4gODA4MDsKICByb290IC9zcnY7Cn0K"
    return {"ID": ctx.ids.swarm(), "Version": {"Index": ctx.next_version()}, "CreatedAt": _stamp(created),
            "UpdatedAt": _stamp(created), "Spec": spec}


def _volume(ctx: _Context, index: int, stacks: list[str]) -> Raw:
    stack = stacks[index % len(stacks)]
    name = f"{stack}_{ctx.rng.choice(_WORDS)}_data_{index}"
    return {"CreatedAt": _stamp(ctx.when())[:19] + "Z", "Driver": "local",
            "Labels": {STACK_LABEL: stack}, "Mountpoint": f"/var/lib/docker/volumes/{name}/_data",
            "Name": name, "Options": None, "Scope": "local"}


# ---------------------------------------------------------------- services
def _service(ctx: _Context, index: int, stacks: list[str], networks: list[Raw], configs: list[Raw],
             secrets: list[Raw], volumes: list[Raw]) -> Raw:
    rng = ctx.rng
    in_stack = rng.random() < 0.8
    stack = stacks[index % len(stacks)] if in_stack else ""
    word = rng.choice(_WORDS)
    name = f"{stack}_{word}{index}" if stack else f"{word}-{index}"
    network = networks[5 + index % len(stacks)] if stack else networks[0]
    image = rng.choice(_IMAGES)
    labels = {STACK_LABEL: stack, "com.docker.stack.image": image} if stack else {"team": rng.choice(_WORDS)}
    container: Raw = {
        "Image": f"{image}@sha256:{ctx.ids.hex64()}",
        "Labels": {STACK_LABEL: stack} if stack else {},
        "Env": ["LOG_LEVEL=info"],
        "Privileges": {"CredentialSpec": None, "SELinuxContext": None}, "Init": rng.random() < 0.3,
        "StopGracePeriod": 10_000_000_000, "DNSConfig": {}, "Isolation": "default",
        "Configs": [_file_ref("Config", rng.choice(configs), f"/etc/{word}.conf")],
        "Secrets": [_file_ref("Secret", rng.choice(secrets), f"/run/secrets/{word}")] if rng.random() < 0.5
        else [],
    }
    if rng.random() < 0.5:
        container["Args"] = ["--port", "8080"]
    if rng.random() < 0.3:
        volume = rng.choice(volumes)
        container["Mounts"] = [{"Type": "volume", "Source": volume["Name"], "Target": "/data"}]
    created = ctx.when()
    replicated = rng.random() >= 0.01
    port = 30000 + index
    spec: Raw = {
        "Name": name, "Labels": labels,
        "TaskTemplate": {
            "ContainerSpec": container,
            "Resources": {"Limits": {"MemoryBytes": 536_870_912}, "Reservations": {}},
            "RestartPolicy": {"Condition": "any", "Delay": 5_000_000_000, "MaxAttempts": 0},
            "Placement": {"Constraints": ["node.role == worker"] if replicated else [],
                          "Platforms": [{"Architecture": "amd64", "OS": "linux"}]},
            "Networks": [{"Target": network["Id"], "Aliases": [word]}],
            "ForceUpdate": 0, "Runtime": "container",
        },
        "Mode": {"Replicated": {"Replicas": 1}} if replicated else {"Global": {}},
        "UpdateConfig": {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5_000_000_000,
                         "MaxFailureRatio": 0, "Order": "stop-first"},
        "EndpointSpec": {"Mode": "vip", "Ports": [{"Protocol": "tcp", "TargetPort": 8080,
                                                   "PublishedPort": port, "PublishMode": "ingress"}]},
    }
    return {
        "ID": ctx.ids.swarm(), "Version": {"Index": ctx.next_version()},
        "CreatedAt": _stamp(created), "UpdatedAt": _stamp(ctx.when(created, 31 * 86400)), "Spec": spec,
        "Endpoint": {"Spec": spec["EndpointSpec"],
                     "Ports": spec["EndpointSpec"]["Ports"],
                     "VirtualIPs": [{"NetworkID": networks[0]["Id"], "Addr": f"10.255.{index // 250}."
                                                                             f"{index % 250 + 2}/16"},
                                    {"NetworkID": network["Id"], "Addr": f"10.0.9.{index % 250 + 2}/24"}]},
    }


def _file_ref(kind: str, target: Raw, path: str) -> Raw:
    return {"File": {"Name": path, "UID": "0", "GID": "0", "Mode": 292},
            f"{kind}ID": target["ID"], f"{kind}Name": target["Spec"]["Name"]}


# ---------------------------------------------------------------- tasks
def _tasks(ctx: _Context, services: list[Raw], nodes: list[Raw], networks: list[Raw]) -> list[Raw]:
    """Exactly ``shape.tasks`` tasks: global services first (one per node), the rest over replicas."""
    network_by_id = {network["Id"]: network for network in networks}
    budget = ctx.shape.tasks
    global_services = [s for s in services if "Global" in s["Spec"]["Mode"]]
    replicated = [s for s in services if "Replicated" in s["Spec"]["Mode"]]
    tasks: list[Raw] = []
    for service in global_services:
        for node in nodes[:min(len(nodes), max(0, budget // 5 - len(tasks)))]:
            tasks.append(_task(ctx, service, node, 0, _pick(ctx.rng, _CURRENT_STATES), network_by_id))
    counts = _spread(ctx.rng, budget - len(tasks), len(replicated))
    workers = [node for node in nodes if node["Spec"]["Role"] == "worker"] or nodes
    for service, count in zip(replicated, counts, strict=True):
        replicas = max(1, round(count * 0.8)) if count else 0
        service["Spec"]["Mode"]["Replicated"]["Replicas"] = max(replicas, 1)
        for position in range(count):
            current = position < replicas
            slot = position + 1 if current else ctx.rng.randint(1, replicas)
            state = _pick(ctx.rng, _CURRENT_STATES if current else _HISTORY_STATES)
            tasks.append(_task(ctx, service, ctx.rng.choice(workers), slot, state, network_by_id))
    ctx.rng.shuffle(tasks)  # the engine lists tasks in no useful order
    return tasks


def _spread(rng: random.Random, total: int, buckets: int) -> list[int]:
    """Split ``total`` into ``buckets`` skewed counts (a few big services, many small ones)."""
    if buckets == 0:
        return []
    weights = [rng.paretovariate(1.5) for _ in range(buckets)]
    scale = total / sum(weights)
    counts = [int(weight * scale) for weight in weights]
    for index in rng.sample(range(buckets), k=min(buckets, total - sum(counts))):
        counts[index] += 1
    return counts  # truncation loses < 1 per bucket, so the sample above restores the exact total


def _pick(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([state for state, _ in table], weights=[weight for _, weight in table])[0]


def _task(ctx: _Context, service: Raw, node: Raw, slot: int, state: str,
          network_by_id: dict[str, Raw]) -> Raw:
    rng, spec = ctx.rng, service["Spec"]
    created = ctx.when()
    updated = created + rng.uniform(0.5, 600)
    container = spec["TaskTemplate"]["ContainerSpec"]
    desired = "running" if state in ("running", "pending") else "shutdown"
    status: Raw = {"Timestamp": _stamp(updated), "State": state, "Message": _message(rng, state),
                   "PortStatus": {}}
    if state == "failed":
        status["Err"] = rng.choice(_FAILURES)
    if state != "pending":
        exit_code = {"running": 0, "complete": 0, "shutdown": rng.choice((0, 143)),
                     "failed": rng.choice((1, 2, 137))}[state]
        status["ContainerStatus"] = {"ContainerID": ctx.ids.hex64(),
                                     "PID": rng.randint(100, 4_000_000) if state == "running" else 0,
                                     "ExitCode": exit_code}
    network = network_by_id[spec["TaskTemplate"]["Networks"][0]["Target"]]
    raw: Raw = {
        "ID": ctx.ids.swarm(), "Version": {"Index": ctx.next_version()},
        "CreatedAt": _stamp(created), "UpdatedAt": _stamp(updated),
        "Labels": {},
        "Spec": {
            "ContainerSpec": {key: container[key] for key in ("Image", "Labels", "Args", "Env", "Init")
                              if key in container},
            "RestartPolicy": {"Condition": "any", "Delay": 5_000_000_000, "MaxAttempts": 0},
            "Networks": spec["TaskTemplate"]["Networks"],
        },
        "ServiceID": service["ID"],
        "Slot": slot,
        "NodeID": node["ID"],
        "Status": status,
        "DesiredState": desired,
        "NetworksAttachments": [{
            "Network": {"ID": network["Id"], "Spec": {"Name": network["Name"]}},
            "Addresses": [f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}/24"],
        }],
    }
    if not slot:
        del raw["Slot"]  # global-service tasks carry no slot
    if state == "pending":
        del raw["NodeID"]  # not scheduled yet
    return raw


def _message(rng: random.Random, state: str) -> str:
    if state == "pending":
        return rng.choice(_PENDING_MESSAGES)
    return {"running": "started", "failed": "started", "complete": "finished",
            "shutdown": "shutdown"}.get(state, state)
