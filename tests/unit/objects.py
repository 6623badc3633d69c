"""A small synthetic swarm in the Docker Engine API 1.41 JSON shape, for unit tests.

Three nodes; a stack ``shop`` (services ``shop_web_api`` and ``shop_db``, a config, a secret, an overlay
network and a volume, all labelled ``com.docker.stack.namespace=shop``); a global service ``monitor`` outside
any stack; tasks for all of them; plus unlabelled objects (``ingress``, ``bridge``, ``app_settings``, ``tls_cert``,
``scratch``). The builders are also used on their own to make objects that are not part of this cluster.
"""

from __future__ import annotations

import copy
from typing import Any

from app.resources import ResourceKind

Raw = dict[str, Any]
STACK_LABEL = "com.docker.stack.namespace"


def engine_id(label: str) -> str:
    """A 25-character lower-case id like the engine's, readable in assertion messages."""
    return (label.replace("_", "").replace("-", "") + "0" * 25)[:25]


# --------------------------------------------------------------------------- ids
NODE_MANAGER = engine_id("nodemanager1")
NODE_WORKER = engine_id("nodeworker1")
NODE_DOWN = engine_id("nodeworker2")

SVC_WEB = engine_id("svcwebapi")
SVC_DB = engine_id("svcdb")
SVC_MONITOR = engine_id("svcmonitor")

CFG_SHOP = engine_id("cfgshopnginx")
CFG_OTHER = engine_id("cfgappsettings")
SEC_SHOP = engine_id("secshopdbpassword")
SEC_OTHER = engine_id("sectlscert")
NET_SHOP = engine_id("netshopdefault")
NET_INGRESS = engine_id("netingress")
NET_BRIDGE = engine_id("netbridge")
VOL_SHOP = "shop_data"
VOL_OTHER = "scratch"

TASK_WEB_1 = engine_id("taskweb1")
TASK_WEB_2 = engine_id("taskweb2")
TASK_DB_1 = engine_id("taskdb1")
TASK_DB_OLD = engine_id("taskdb1old")
TASK_MON_MANAGER = engine_id("taskmonmanager")
TASK_MON_WORKER = engine_id("taskmonworker")
TASK_MON_DOWN = engine_id("taskmondown")

SECRET_DATA = "c3VwZXItc2VjcmV0LXBhc3N3b3Jk"  # base64("super-secret-password"); must never be served
CONFIG_DATA = "c2VydmVyIHsgbGlzdGVuIDgwOyB9"  # base64("server { listen 80; }")

CREATED = "2024-05-01T10:00:00.123456789Z"
UPDATED = "2024-05-02T11:30:15.987654321Z"


def _stack_labels(stack: str | None, **extra: str) -> dict[str, str]:
    labels = dict(extra)
    if stack:
        labels[STACK_LABEL] = stack
    return labels


# --------------------------------------------------------------------------- builders
def node(node_id: str, hostname: str, *, role: str = "worker", state: str = "ready",
         availability: str = "active", version: int = 10, updated: str = UPDATED) -> Raw:
    raw: Raw = {
        "ID": node_id,
        "Version": {"Index": version},
        "CreatedAt": CREATED,
        "UpdatedAt": updated,
        "Spec": {"Labels": {"zone": "a"}, "Role": role, "Availability": availability},
        "Description": {
            "Hostname": hostname,
            "Platform": {"Architecture": "x86_64", "OS": "linux"},
            "Resources": {"NanoCPUs": 4_000_000_000, "MemoryBytes": 8_589_934_592},
            "Engine": {"EngineVersion": "20.10.24", "Plugins": [{"Type": "Volume", "Name": "local"}]},
            "TLSInfo": {"TrustRoot": "-----BEGIN CERTIFICATE-----\n...", "CertIssuerSubject": "MBMx",
                        "CertIssuerPublicKey": "MFkw"},
        },
        "Status": {"State": state, "Addr": f"10.0.0.{sum(map(ord, node_id)) % 200 + 1}"},
    }
    if role == "manager":
        raw["ManagerStatus"] = {"Leader": True, "Reachability": "reachable", "Addr": "10.0.0.1:2377"}
    return raw


def service(service_id: str, name: str, *, stack: str | None = None, image: str = "nginx:1.25",
            replicas: int | None = 1, configs: tuple[tuple[str, str], ...] = (),
            secrets: tuple[tuple[str, str], ...] = (), networks: tuple[str, ...] = (),
            volumes: tuple[str, ...] = (), version: int = 20, updated: str = UPDATED,
            labels: dict[str, str] | None = None) -> Raw:
    """``configs``/``secrets`` are (id, name) pairs; ``networks`` ids; ``volumes`` volume names."""
    container: Raw = {
        "Image": f"{image}@sha256:{'ab' * 32}",
        "Labels": _stack_labels(stack),
        "Privileges": {"CredentialSpec": None, "SELinuxContext": None},
        "StopGracePeriod": 10_000_000_000,
        "DNSConfig": {},
        "Isolation": "default",
    }
    if configs:
        container["Configs"] = [
            {"File": {"Name": f"/etc/{config_name}", "UID": "0", "GID": "0", "Mode": 292},
             "ConfigID": config_id, "ConfigName": config_name} for config_id, config_name in configs]
    if secrets:
        container["Secrets"] = [
            {"File": {"Name": secret_name, "UID": "0", "GID": "0", "Mode": 292},
             "SecretID": secret_id, "SecretName": secret_name} for secret_id, secret_name in secrets]
    if volumes:
        container["Mounts"] = [
            {"Type": "volume", "Source": volume, "Target": f"/data/{volume}",
             "VolumeOptions": {"Labels": _stack_labels(stack)}} for volume in volumes]
        container["Mounts"].append({"Type": "bind", "Source": "/var/run", "Target": "/host/run"})
    mode: Raw = {"Replicated": {"Replicas": replicas}} if replicas is not None else {"Global": {}}
    return {
        "ID": service_id,
        "Version": {"Index": version},
        "CreatedAt": CREATED,
        "UpdatedAt": updated,
        "Spec": {
            "Name": name,
            "Labels": _stack_labels(stack, **(labels or {})) | (
                {"com.docker.stack.image": image} if stack else {}),
            "TaskTemplate": {
                "ContainerSpec": container,
                "Resources": {"Limits": {}, "Reservations": {}},
                "RestartPolicy": {"Condition": "any", "Delay": 5_000_000_000, "MaxAttempts": 0},
                "Placement": {"Platforms": [{"Architecture": "amd64", "OS": "linux"}]},
                "Networks": [{"Target": network, "Aliases": [name.split("_")[-1]]} for network in networks],
                "ForceUpdate": 0,
                "Runtime": "container",
            },
            "Mode": mode,
            "UpdateConfig": {"Parallelism": 1, "FailureAction": "pause", "Order": "stop-first"},
            "EndpointSpec": {"Mode": "vip"},
        },
        "Endpoint": {"Spec": {"Mode": "vip"},
                     "VirtualIPs": [{"NetworkID": network, "Addr": "10.0.1.2/24"} for network in networks]},
    }


def task(task_id: str, service_id: str, node_id: str, *, slot: int | None = 1, state: str = "running",
         desired: str = "running", image: str = "nginx:1.25", exit_code: int = 0, error: str = "",
         version: int = 30, updated: str = UPDATED) -> Raw:
    status: Raw = {
        "Timestamp": updated, "State": state, "Message": state,
        "ContainerStatus": {"ContainerID": "c" * 64, "PID": 4242 if state == "running" else 0,
                            "ExitCode": exit_code},
        "PortStatus": {},
    }
    if error:
        status["Err"] = error
    raw: Raw = {
        "ID": task_id,
        "Version": {"Index": version},
        "CreatedAt": CREATED,
        "UpdatedAt": updated,
        "Labels": {},
        "Spec": {"ContainerSpec": {"Image": f"{image}@sha256:{'ab' * 32}", "Isolation": "default"},
                 "Resources": {"Limits": {}, "Reservations": {}}, "ForceUpdate": 0},
        "ServiceID": service_id,
        "NodeID": node_id,
        "Status": status,
        "DesiredState": desired,
        "NetworksAttachments": [],
    }
    if slot is not None:
        raw["Slot"] = slot
    return raw


def config(config_id: str, name: str, *, stack: str | None = None, data: str = CONFIG_DATA,
           version: int = 40, updated: str = UPDATED) -> Raw:
    return {"ID": config_id, "Version": {"Index": version}, "CreatedAt": CREATED, "UpdatedAt": updated,
            "Spec": {"Name": name, "Labels": _stack_labels(stack), "Data": data}}


def secret(secret_id: str, name: str, *, stack: str | None = None, data: str | None = SECRET_DATA,
           version: int = 50, updated: str = UPDATED) -> Raw:
    spec: Raw = {"Name": name, "Labels": _stack_labels(stack)}
    if data is not None:
        spec["Data"] = data
    return {"ID": secret_id, "Version": {"Index": version}, "CreatedAt": CREATED, "UpdatedAt": updated,
            "Spec": spec}


def network(network_id: str, name: str, *, stack: str | None = None, driver: str = "overlay",
            scope: str = "swarm", created: str = CREATED, ingress: bool = False) -> Raw:
    return {
        "Name": name, "Id": network_id, "Created": created, "Scope": scope, "Driver": driver,
        "EnableIPv6": False,
        "IPAM": {"Driver": "default", "Options": None,
                 "Config": [{"Subnet": "10.0.1.0/24", "Gateway": "10.0.1.1"}]},
        "Internal": False, "Attachable": False, "Ingress": ingress, "ConfigFrom": {"Network": ""},
        "ConfigOnly": False, "Containers": {}, "Options": {}, "Labels": _stack_labels(stack),
    }


def volume(name: str, *, stack: str | None = None, driver: str = "local", scope: str = "local",
           created: str = "2024-05-01T10:00:00Z") -> Raw:
    return {"CreatedAt": created, "Driver": driver, "Labels": _stack_labels(stack),
            "Mountpoint": f"/var/lib/docker/volumes/{name}/_data", "Name": name, "Options": None,
            "Scope": scope}


# --------------------------------------------------------------------------- the cluster
HOSTNAMES = {NODE_MANAGER: "manager-1", NODE_WORKER: "worker-1", NODE_DOWN: "worker-2"}
SERVICE_NAMES = {SVC_WEB: "shop_web_api", SVC_DB: "shop_db", SVC_MONITOR: "monitor"}


def cluster() -> dict[ResourceKind, list[Raw]]:
    """A fresh (deep-copied) synthetic cluster, in engine listing order."""
    objects: dict[ResourceKind, list[Raw]] = {
        ResourceKind.NODE: [
            node(NODE_MANAGER, "manager-1", role="manager"),
            node(NODE_WORKER, "worker-1"),
            node(NODE_DOWN, "worker-2", state="down", availability="drain"),
        ],
        ResourceKind.SERVICE: [
            service(SVC_WEB, "shop_web_api", stack="shop", replicas=2,
                    configs=((CFG_SHOP, "shop_nginx"),), secrets=((SEC_SHOP, "shop_db_password"),),
                    networks=(NET_SHOP,), volumes=(VOL_SHOP,),
                    labels={"traefik.enable": "true"}),
            service(SVC_DB, "shop_db", stack="shop", image="postgres:16",
                    secrets=((SEC_SHOP, "shop_db_password"),), networks=(NET_SHOP,)),
            service(SVC_MONITOR, "monitor", image="prom/node-exporter:v1.8.0", replicas=None,
                    configs=((CFG_OTHER, "app_settings"),), networks=(NET_INGRESS,)),
        ],
        ResourceKind.TASK: [
            task(TASK_WEB_1, SVC_WEB, NODE_MANAGER, slot=1),
            task(TASK_WEB_2, SVC_WEB, NODE_WORKER, slot=2),
            task(TASK_DB_1, SVC_DB, NODE_WORKER, slot=1, image="postgres:16"),
            task(TASK_DB_OLD, SVC_DB, NODE_DOWN, slot=1, state="failed", desired="shutdown",
                 image="postgres:16", exit_code=137, error="task: non-zero exit (137)"),
            task(TASK_MON_MANAGER, SVC_MONITOR, NODE_MANAGER, slot=None,
                 image="prom/node-exporter:v1.8.0"),
            task(TASK_MON_WORKER, SVC_MONITOR, NODE_WORKER, slot=None, state="pending",
                 image="prom/node-exporter:v1.8.0"),
            task(TASK_MON_DOWN, SVC_MONITOR, NODE_DOWN, slot=None, state="shutdown", desired="shutdown",
                 image="prom/node-exporter:v1.8.0"),
        ],
        ResourceKind.CONFIG: [
            config(CFG_SHOP, "shop_nginx", stack="shop"),
            config(CFG_OTHER, "app_settings"),
        ],
        ResourceKind.SECRET: [
            secret(SEC_SHOP, "shop_db_password", stack="shop"),
            secret(SEC_OTHER, "tls_cert", data=None),
        ],
        ResourceKind.NETWORK: [
            network(NET_SHOP, "shop_default", stack="shop", created="2024-05-03T08:00:00.5Z"),
            network(NET_INGRESS, "ingress", ingress=True),
            network(NET_BRIDGE, "bridge", driver="bridge", scope="local"),
        ],
        ResourceKind.VOLUME: [
            volume(VOL_SHOP, stack="shop", created="2024-05-04T09:15:00Z"),
            volume(VOL_OTHER),
        ],
    }
    return copy.deepcopy(objects)
