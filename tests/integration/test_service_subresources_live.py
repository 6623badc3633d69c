"""Service sub-resources through the API against the lab engine: every sub-resource written (PUT and/or both
patch types) and checked with the engine's own inspect; the GET shapes against the engine's spec; bad bodies
refused naming the field with nothing written; 415 with Accept-Patch; Allow / Accept-Patch and OPS001 at
operations levels 0 to 3."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from json import dumps
from typing import Any

import docker
import pytest

from tests.conftest import running_app, start_runtime_app, wait_for, wait_steady
from tests.integration.engine_state import settled_etag, sleeper

pytestmark = pytest.mark.integration

JP, MP = "application/json-patch+json", "application/merge-patch+json"
TIER2 = ("env", "labels", "resources", "placement", "ports", "update-policy", "rollback-policy", "log-driver",
         "healthcheck", "container-config", "configs", "secrets", "networks", "mounts")


def unique(prefix: str) -> str:
    return f"t-subres-{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def app3(docker_host: str) -> Iterator[Any]:
    yield from running_app(docker_host, operations_level=3)


def cached(app: Any, path: str) -> None:
    client = app.test_client()
    wait_for(lambda: client.get(path).status_code == 200, 15, message=f"{path} cached")


@pytest.fixture
def service(dclient: docker.DockerClient, app3: Any) -> Iterator[Any]:
    created = sleeper(dclient, unique("svc"), env=["BARE", "A=1"])
    cached(app3, f"/services/{created.id}")
    yield created
    with contextlib.suppress(docker.errors.NotFound):
        created.remove()


def inspected(engine: docker.APIClient, service_id: str) -> dict[str, Any]:
    found: dict[str, Any] = engine.inspect_service(service_id)  # type: ignore[no-untyped-call]
    return found


def spec(engine: docker.APIClient, service_id: str) -> dict[str, Any]:
    found: dict[str, Any] = inspected(engine, service_id)["Spec"]
    return found


def container(engine: docker.APIClient, service_id: str) -> dict[str, Any]:
    found: dict[str, Any] = spec(engine, service_id)["TaskTemplate"]["ContainerSpec"]
    return found


def version(engine: docker.APIClient, service_id: str) -> int:
    return int(inspected(engine, service_id)["Version"]["Index"])


def at_rest(engine: docker.APIClient, service_id: str) -> int:
    """The service's version once its update has rolled out (the engine bumps the version as the update
    status moves) and it has stayed the same for a second."""
    def rolled_out() -> int | None:
        found = inspected(engine, service_id)
        rolling = (found.get("UpdateStatus") or {}).get("State") in ("updating", "rollback_started")
        return None if rolling else int(found["Version"]["Index"])

    return int(wait_steady(rolled_out, 1.0, 60, interval=0.2, message="the service's update rolled out"))


class Writer:
    """The app's test client for writes that first waits until the cache holds the service's current version:
    the engine bumps it on its own after some writes (VIP allocation after an endpoint change), and a write
    based on the older one is rightly refused (SVC001). Bodies keep their key order (Flask's ``json=`` sorts)."""

    def __init__(self, app: Any, engine: docker.APIClient) -> None:
        self.client = app.test_client()
        self.engine = engine

    def get(self, path: str, **options: Any) -> Any:
        return self.client.get(path, **options)

    def put(self, path: str, *, json: Any, **options: Any) -> Any:
        self._settle(path)
        return self.client.put(path, data=dumps(json), content_type="application/json", **options)

    def patch(self, path: str, **options: Any) -> Any:
        self._settle(path)
        return self.client.patch(path, **options)

    def _settle(self, path: str) -> None:
        service_id = path.split("/")[2]
        if self.client.get(f"/services/{service_id}").status_code != 200:
            return

        def settled() -> bool:
            cached = self.client.get(f"/services/{service_id}").get_json()["service"]["Version"]["Index"]
            return bool(cached == version(self.engine, service_id))

        wait_for(settled, 10, interval=0.1, message="the cache holds the service's current version")


def patch(client: Writer, path: str, body: Any, media: str, **headers: str) -> Any:
    return client.patch(path, data=dumps(body), content_type=media, headers=headers)


def ok(response: Any, jsonld_type: str) -> dict[str, Any]:
    assert response.status_code == 200, response.get_json()
    body: dict[str, Any] = response.get_json()
    assert body["@type"] == jsonld_type
    return body


# ---------------------------------------------------------------------------------------------- reads
def test_get_shapes_follow_the_engine_spec(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = Writer(app3, engine)
    base = f"/services/{service.id}"
    env = ok(client.get(f"{base}/env"), "ServiceEnv")
    assert env["@id"] == f"{base}/env" and env["env"] == {"BARE": "", "A": "1"}
    engine_spec = spec(engine, service.id)
    assert ok(client.get(f"{base}/labels"), "ServiceLabels")["labels"] == engine_spec["Labels"]
    assert ok(client.get(f"{base}/resources"), "ServiceResources")["resources"] == {
        "Limits": engine_spec["TaskTemplate"].get("Resources", {}).get("Limits", {}),
        "Reservations": engine_spec["TaskTemplate"].get("Resources", {}).get("Reservations", {})}
    assert ok(client.get(f"{base}/healthcheck"), "ServiceHealthcheck")["healthcheck"] is None
    assert ok(client.get(f"{base}/log-driver"), "ServiceLogDriver")["logDriver"] is None
    assert ok(client.get(f"{base}/ports"), "ServicePorts")["ports"] == []
    assert ok(client.get(f"{base}/update-policy"), "ServiceUpdatePolicy")["updatePolicy"] == \
        engine_spec.get("UpdateConfig", {})
    assert ok(client.get(f"{base}/rollback-policy"), "ServiceRollbackPolicy")["rollbackPolicy"] == \
        engine_spec.get("RollbackConfig", {})
    assert ok(client.get(f"{base}/placement"), "ServicePlacement")["placement"] == \
        engine_spec["TaskTemplate"].get("Placement", {})
    for sub, key in (("configs", "configs"), ("secrets", "secrets"), ("networks", "networks"), ("mounts", "mounts")):
        assert ok(client.get(f"{base}/{sub}"), "Service" + sub.capitalize())[key] == []
    config = ok(client.get(f"{base}/container-config"), "ServiceContainerConfig")["containerConfig"]
    assert config["command"] == engine_spec["TaskTemplate"]["ContainerSpec"]["Command"] == ["sleep", "1000000"]
    assert config["args"] == [] and config["user"] == ""
    assert config["init"] is True and config["stopGracePeriod"] == 1_000_000_000 and config["tty"] is False
    mode = ok(client.get(f"{base}/mode"), "ServiceMode")
    assert (mode["mode"], mode["replicas"]) == ("replicated", 1)
    assert ok(client.get(f"{base}/endpoint-mode"), "ServiceEndpointMode")["endpointMode"] == "dnsrr"
    missing = client.get("/services/nope/env")
    assert missing.status_code == 404 and missing.get_json()["type"] == "about:blank"


# ---------------------------------------------------------------------------------------------- env, labels
def test_env_with_both_patch_types_and_put_back_of_the_get(app3: Any, service: Any,
                                                           engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/env"
    body = ok(patch(client, path, [{"op": "add", "path": "/B", "value": "2"},
                                   {"op": "replace", "path": "A", "value": "10"}], JP), "ServiceEnv")
    assert body["env"] == {"BARE": "", "A": "10", "B": "2"} and body["@id"] == path
    assert container(engine, service.id)["Env"] == ["BARE", "A=10", "B=2"]
    body = ok(patch(client, path, {"A": None, "C": "x=y"}, MP), "ServiceEnv")
    assert container(engine, service.id)["Env"] == ["BARE", "B=2", "C=x=y"]
    document = client.get(path).get_json()          # GET → edit → PUT, JSON-LD members and all
    document["env"]["D"] = "4"
    ok(client.put(path, json=document), "ServiceEnv")
    assert container(engine, service.id)["Env"] == ["BARE", "B=2", "C=x=y", "D=4"]
    ok(client.put(path, json={"E": "5"}), "ServiceEnv")   # bare
    assert container(engine, service.id)["Env"] == ["E=5"]


def test_map_patch_rules_write_nothing_when_they_fail(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/env"
    before = version(engine, service.id)
    failed = patch(client, path, [{"op": "test", "path": "/A", "value": "2"},
                                  {"op": "add", "path": "/Z", "value": "1"}], JP)
    assert failed.status_code == 409 and failed.get_json()["code"] == "API010"
    moved = patch(client, path, [{"op": "move", "from": "/A", "path": "/B"}], JP)
    assert moved.status_code == 400 and moved.get_json()["code"] == "API011"
    missing = patch(client, path, [{"op": "remove", "path": "/NOPE"}], JP)
    assert missing.status_code == 400 and missing.get_json()["code"] == "API011"
    typed = client.put(path, json={"A": 1})
    assert typed.status_code == 400 and typed.get_json()["field"] == "env.A"
    assert version(engine, service.id) == before


def test_labels_put_and_patch(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/labels"
    ok(patch(client, path, {"tier": "web"}, MP), "ServiceLabels")
    assert spec(engine, service.id)["Labels"] == {"shoal.test": "1", "tier": "web"}
    body = ok(patch(client, path, [{"op": "remove", "path": "/tier"}, {"op": "add", "path": "/a~1b", "value": "c"}],
                    JP), "ServiceLabels")
    assert body["labels"] == spec(engine, service.id)["Labels"] == {"shoal.test": "1", "a/b": "c"}
    ok(client.put(path, json={"labels": {"shoal.test": "1"}}), "ServiceLabels")
    assert spec(engine, service.id)["Labels"] == {"shoal.test": "1"}


# ---------------------------------------------------------------------------------------------- objects
def test_resources_merge_and_json_patch(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/resources"
    body = ok(patch(client, path, {"Limits": {"MemoryBytes": 64 * 2**20, "NanoCPUs": 500_000_000},
                                   "Reservations": {"MemoryBytes": 8 * 2**20}}, MP), "ServiceResources")
    resources = spec(engine, service.id)["TaskTemplate"]["Resources"]
    assert resources["Limits"] == {"MemoryBytes": 64 * 2**20, "NanoCPUs": 500_000_000}
    assert resources["Reservations"] == {"MemoryBytes": 8 * 2**20}
    assert body["resources"] == resources
    ok(patch(client, path, [{"op": "remove", "path": "/Limits/NanoCPUs"}], JP), "ServiceResources")
    assert spec(engine, service.id)["TaskTemplate"]["Resources"]["Limits"] == {"MemoryBytes": 64 * 2**20}
    before = version(engine, service.id)
    refused = patch(client, path, {"Reservations": {"MemoryBytes": 128 * 2**20}}, MP)
    assert refused.status_code == 400 and refused.get_json()["code"] == "SVC011"
    assert refused.get_json()["field"] == "resources.Reservations.MemoryBytes"
    unknown = patch(client, path, {"Limits": {"Memory": 1}}, MP)
    assert unknown.get_json()["code"] == "SVC011" and unknown.get_json()["field"] == "resources.Limits.Memory"
    assert version(engine, service.id) == before


def test_placement_put(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/placement"
    value = {"Constraints": ["node.role==manager"],
             "Preferences": [{"Spread": {"SpreadDescriptor": "node.labels.zone"}}], "MaxReplicas": 3}
    body = ok(client.put(path, json=value), "ServicePlacement")
    placement = spec(engine, service.id)["TaskTemplate"]["Placement"]
    assert placement["Constraints"] == ["node.role==manager"] and placement["MaxReplicas"] == 3
    assert placement["Preferences"] == value["Preferences"] and body["placement"] == placement
    bad = client.put(path, json={"Constraints": ["node.role"]})
    assert bad.status_code == 400 and bad.get_json()["field"] == "placement.Constraints[0]"


def test_update_and_rollback_policies(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = Writer(app3, engine)
    base = f"/services/{service.id}"
    body = ok(patch(client, f"{base}/update-policy", {"Parallelism": 2, "Order": "start-first",
                                                      "FailureAction": "rollback"}, MP), "ServiceUpdatePolicy")
    update = spec(engine, service.id)["UpdateConfig"]
    assert (update["Parallelism"], update["Order"], update["FailureAction"]) == (2, "start-first", "rollback")
    assert body["updatePolicy"] == update
    ok(patch(client, f"{base}/update-policy", [{"op": "replace", "path": "/Parallelism", "value": 3}], JP),
       "ServiceUpdatePolicy")
    assert spec(engine, service.id)["UpdateConfig"]["Parallelism"] == 3
    ok(client.put(f"{base}/rollback-policy", json={"rollbackPolicy": {"Parallelism": 1, "Monitor": 2_000_000_000,
                                                                      "MaxFailureRatio": 0.5}}),
       "ServiceRollbackPolicy")
    rollback = spec(engine, service.id)["RollbackConfig"]
    assert (rollback["Parallelism"], rollback["Monitor"], rollback["MaxFailureRatio"]) == (1, 2_000_000_000, 0.5)
    refused = patch(client, f"{base}/rollback-policy", {"FailureAction": "rollback"}, MP)
    assert refused.get_json()["code"] == "SVC013" and refused.get_json()["field"] == "rollbackPolicy.FailureAction"
    refused = patch(client, f"{base}/update-policy", {"Order": "random"}, MP)
    assert refused.get_json()["code"] == "SVC012"


def test_log_driver_put_patch_and_clear(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/log-driver"
    ok(client.put(path, json={"Name": "json-file", "Options": {"max-size": "10m"}}), "ServiceLogDriver")
    assert spec(engine, service.id)["TaskTemplate"]["LogDriver"] == {"Name": "json-file",
                                                                    "Options": {"max-size": "10m"}}
    body = ok(patch(client, path, {"Options": {"max-file": "3"}}, MP), "ServiceLogDriver")
    assert body["logDriver"]["Options"] == {"max-size": "10m", "max-file": "3"}
    assert spec(engine, service.id)["TaskTemplate"]["LogDriver"]["Options"] == {"max-size": "10m", "max-file": "3"}
    refused = patch(client, path, {"Options": {"max-file": 3}}, MP)
    assert refused.get_json()["code"] == "SVC019" and refused.get_json()["field"] == "logDriver.Options.max-file"
    body = ok(patch(client, path, {"logDriver": None}, MP), "ServiceLogDriver")
    assert body["logDriver"] is None and "LogDriver" not in spec(engine, service.id)["TaskTemplate"]


def test_healthcheck_put_patch_and_failed_test(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/healthcheck"
    check = {"Test": ["CMD-SHELL", "true"], "Interval": 5_000_000_000, "Timeout": 2_000_000_000, "Retries": 3}
    ok(client.put(path, json=check), "ServiceHealthcheck")
    assert container(engine, service.id)["Healthcheck"] == check
    ok(patch(client, path, {"Retries": 5, "Timeout": None}, MP), "ServiceHealthcheck")
    assert container(engine, service.id)["Healthcheck"] == {"Test": ["CMD-SHELL", "true"], "Interval": 5_000_000_000,
                                                            "Retries": 5}
    body = ok(patch(client, path, [{"op": "test", "path": "/Retries", "value": 5},
                                   {"op": "replace", "path": "/Test/1", "value": "exit 0"}], JP), "ServiceHealthcheck")
    assert body["healthcheck"]["Test"] == ["CMD-SHELL", "exit 0"]
    assert container(engine, service.id)["Healthcheck"]["Test"] == ["CMD-SHELL", "exit 0"]
    before = version(engine, service.id)
    failed = patch(client, path, [{"op": "test", "path": "/Retries", "value": 9}], JP)
    assert failed.status_code == 409 and failed.get_json()["code"] == "API010"
    refused = client.put(path, json={"Test": ["CMD"]})
    assert refused.get_json()["code"] == "SVC014" and refused.get_json()["field"] == "healthcheck.Test"
    refused = client.put(path, json={"Test": ["CMD", "x"], "Interval": 5})
    assert refused.get_json()["field"] == "healthcheck.Interval"
    assert version(engine, service.id) == before
    ok(client.put(path, json={"healthcheck": None}), "ServiceHealthcheck")
    assert "Healthcheck" not in container(engine, service.id)


def test_container_config(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/container-config"
    body = ok(patch(client, path, {"user": "nobody", "hostname": "h1", "stopSignal": "SIGINT", "hosts": ["10.0.0.1 db"],
                                   "capabilityAdd": ["CAP_NET_ADMIN"], "readOnly": True,
                                   "dnsConfig": {"nameservers": ["10.0.0.53"], "options": ["ndots:2"]}}, MP),
              "ServiceContainerConfig")
    engine_container = container(engine, service.id)
    assert (engine_container["User"], engine_container["Hostname"], engine_container["StopSignal"]) == \
        ("nobody", "h1", "SIGINT")
    assert engine_container["Hosts"] == ["10.0.0.1 db"] and engine_container["CapabilityAdd"] == ["CAP_NET_ADMIN"]
    assert engine_container["ReadOnly"] is True
    assert engine_container["DNSConfig"] == {"Nameservers": ["10.0.0.53"], "Options": ["ndots:2"]}
    assert engine_container["Init"] is True and engine_container["StopGracePeriod"] == 1_000_000_000   # kept
    assert body["containerConfig"]["dnsConfig"] == {"nameservers": ["10.0.0.53"], "search": [], "options": ["ndots:2"]}
    ok(patch(client, path, [{"op": "replace", "path": "/command", "value": ["sleep", "999"]},
                            {"op": "replace", "path": "/dnsConfig", "value": None}], JP), "ServiceContainerConfig")
    engine_container = container(engine, service.id)
    assert engine_container["Command"] == ["sleep", "999"] and "DNSConfig" not in engine_container
    refused = patch(client, path, {"tty": "yes"}, MP)
    assert refused.get_json()["code"] == "SVC018" and refused.get_json()["field"] == "containerConfig.tty"


# ---------------------------------------------------------------------------------------------- lists
def test_ports_host_mode_then_ingress_after_vip(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = Writer(app3, engine)
    base = f"/services/{service.id}"
    host = {"Protocol": "tcp", "TargetPort": 8080, "PublishedPort": 38081, "PublishMode": "host"}
    body = ok(patch(client, f"{base}/ports", {"ports": [host]}, MP), "ServicePorts")
    assert spec(engine, service.id)["EndpointSpec"]["Ports"] == [host] == body["ports"]
    ingress = {"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 38082, "PublishMode": "ingress"}
    before = at_rest(engine, service.id)   # the engine moves the version itself while the update rolls out
    refused = patch(client, f"{base}/ports", [{"op": "add", "path": "/-", "value": ingress}], JP)
    assert refused.status_code == 400 and refused.get_json()["code"] == "ENG003"   # dnsrr + ingress
    assert version(engine, service.id) == before
    detail = client.put(f"{base}/endpoint-mode", json={"mode": "vip"})
    assert detail.status_code == 200 and detail.get_json()["@type"] == "Service"
    assert spec(engine, service.id)["EndpointSpec"]["Mode"] == "vip"
    ok(patch(client, f"{base}/ports", [{"op": "add", "path": "/-", "value": ingress}], JP), "ServicePorts")
    assert spec(engine, service.id)["EndpointSpec"]["Ports"] == [host, ingress]
    ok(client.put(f"{base}/ports", json=[]), "ServicePorts")
    assert not spec(engine, service.id)["EndpointSpec"].get("Ports")
    back = client.put(f"{base}/endpoint-mode", json={"endpointMode": "dnsrr"})   # as the GET shows it
    assert back.status_code == 200 and spec(engine, service.id)["EndpointSpec"]["Mode"] == "dnsrr"
    refused = client.put(f"{base}/endpoint-mode", json={"mode": "round-robin"})
    assert refused.get_json()["code"] == "SVC010"
    refused = client.put(f"{base}/ports", json={"ports": [{"PublishedPort": 1}]})
    assert refused.get_json()["field"] == "ports[0].TargetPort"


def test_configs_and_secrets(app3: Any, service: Any, engine: docker.APIClient, dclient: docker.DockerClient) -> None:
    config = dclient.configs.create(name=unique("cfg"), data=b"key=value")
    secret = dclient.secrets.create(name=unique("sec"), data=b"s3cret")
    client = Writer(app3, engine)
    base = f"/services/{service.id}"
    try:
        cached(app3, f"/configs/{config.id}")
        cached(app3, f"/secrets/{secret.id}")
        config_name, secret_name = config.name, secret.name
        body = ok(patch(client, f"{base}/configs", {"configs": [{"configName": config_name}]}, MP), "ServiceConfigs")
        assert body["configs"] == [{"configID": config.id, "configName": config_name, "fileName": f"/{config_name}"}]
        assert container(engine, service.id)["Configs"] == [{
            "File": {"Name": f"/{config_name}", "UID": "0", "GID": "0", "Mode": 0o444},
            "ConfigID": config.id, "ConfigName": config_name}]
        body = ok(client.put(f"{base}/secrets", json=[{"secretID": secret.id, "fileName": "app-secret"}]),
                  "ServiceSecrets")
        assert body["secrets"] == [{"secretID": secret.id, "secretName": secret_name, "fileName": "app-secret"}]
        assert container(engine, service.id)["Secrets"] == [{
            "File": {"Name": "app-secret", "UID": "0", "GID": "0", "Mode": 0o444},
            "SecretID": secret.id, "SecretName": secret_name}]
        ok(patch(client, f"{base}/secrets", [{"op": "replace", "path": "/0/fileName", "value": "/run/secrets/other"}],
                 JP), "ServiceSecrets")
        assert container(engine, service.id)["Secrets"][0]["File"]["Name"] == "/run/secrets/other"
        refused = patch(client, f"{base}/configs", {"configs": [{"configName": "no-such-config"}]}, MP)
        assert refused.get_json()["code"] == "SVC015" and refused.get_json()["field"] == "configs[0].configName"
        refused = patch(client, f"{base}/secrets", {"secrets": [{"fileName": "x"}]}, MP)
        assert refused.get_json()["code"] == "SVC016" and refused.get_json()["field"] == "secrets[0]"
        ok(patch(client, f"{base}/configs", {"configs": []}, MP), "ServiceConfigs")
        ok(client.put(f"{base}/secrets", json={"secrets": []}), "ServiceSecrets")
        assert not container(engine, service.id).get("Configs") and not container(engine, service.id).get("Secrets")
    finally:
        service.remove()
        wait_for(lambda: _removed(config) and _removed(secret), 30, message="config and secret removed")


def _removed(obj: Any) -> bool:
    try:
        obj.remove()
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError:
        return False   # still referenced by a task being shut down
    return True


def test_networks(app3: Any, service: Any, engine: docker.APIClient, dclient: docker.DockerClient) -> None:
    network = dclient.networks.create(unique("net"), driver="overlay", attachable=True)
    client, path = Writer(app3, engine), f"/services/{service.id}/networks"
    try:
        cached(app3, f"/networks/{network.id}")
        body = ok(client.put(path, json={"networks": [{"target": network.name, "aliases": ["db"]}]}), "ServiceNetworks")
        assert body["networks"] == [{"target": network.id, "aliases": ["db"]}]
        assert spec(engine, service.id)["TaskTemplate"]["Networks"] == [{"Target": network.id, "Aliases": ["db"]}]
        ok(patch(client, path, [{"op": "remove", "path": "/0/aliases"}], JP), "ServiceNetworks")
        assert spec(engine, service.id)["TaskTemplate"]["Networks"] == [{"Target": network.id}]
        refused = client.put(path, json=[{"target": "no-such-network"}])
        assert refused.get_json()["code"] == "SVC017" and refused.get_json()["field"] == "networks[0].target"
        refused = client.put(path, json=[{"aliases": ["x"]}])
        assert refused.get_json()["code"] == "SVC017"
        refused = client.put(path, json=[{"target": "ingress"}])
        assert refused.get_json()["code"] == "SVC017"
        ok(patch(client, path, {"networks": []}, MP), "ServiceNetworks")
        assert not spec(engine, service.id)["TaskTemplate"].get("Networks")
    finally:
        service.remove()
        wait_for(lambda: _removed(network), 30, message="network removed")


def test_mounts(app3: Any, service: Any, engine: docker.APIClient, dclient: docker.DockerClient) -> None:
    volume = unique("vol")
    client, path = Writer(app3, engine), f"/services/{service.id}/mounts"
    try:
        mount = {"Type": "volume", "Source": volume, "Target": "/data"}
        body = ok(patch(client, path, {"mounts": [mount]}, MP), "ServiceMounts")
        assert container(engine, service.id)["Mounts"] == [mount] == body["mounts"]
        ok(patch(client, path, [{"op": "add", "path": "/0/ReadOnly", "value": True}], JP), "ServiceMounts")
        assert container(engine, service.id)["Mounts"][0]["ReadOnly"] is True
        refused = client.put(path, json=[{"Type": "bind", "Target": "/x"}])
        assert refused.status_code == 400 and refused.get_json()["field"] == "mounts[0].Source"
        refused = client.put(path, json=[{"Type": "volume", "Target": "relative"}])
        assert refused.get_json()["field"] == "mounts[0].Target"
    finally:
        service.remove()
        wait_for(lambda: _volume_gone(dclient, volume), 30, message="volume removed")


def _volume_gone(dclient: docker.DockerClient, name: str) -> bool:
    try:
        dclient.volumes.get(name).remove()
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError:
        return False   # the task's container is still going away
    return True


# ---------------------------------------------------------------------------------------------- mode
def test_mode(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/mode"
    detail = client.put(path, json={"mode": "replicated", "replicas": 2})
    assert detail.status_code == 200 and detail.get_json()["@type"] == "Service"
    assert spec(engine, service.id)["Mode"] == {"Replicated": {"Replicas": 2}}
    document = client.get(path).get_json()   # GET → PUT back (JSON-LD members ignored)
    assert (document["mode"], document["replicas"]) == ("replicated", 2)
    document["replicas"] = 1
    assert client.put(path, json=document).status_code == 200
    assert spec(engine, service.id)["Mode"] == {"Replicated": {"Replicas": 1}}
    before = version(engine, service.id)
    for body, code in (({"mode": "daemon"}, "SVC008"), ({"mode": "replicated"}, "SVC009"),
                       ({"mode": "replicated", "replicas": -1}, "SVC009"),
                       ({"mode": "global", "replicas": 3}, "SVC008")):
        refused = client.put(path, json=body)
        assert refused.status_code == 400 and refused.get_json()["code"] == code, body
    changed = client.put(path, json={"mode": "global"})   # the engine refuses a mode change (swarmkit)
    if changed.status_code == 200:
        assert "Global" in spec(engine, service.id)["Mode"]
    else:
        assert changed.status_code == 400 and changed.get_json()["code"] == "ENG003", changed.get_json()
        assert version(engine, service.id) == before


# ---------------------------------------------------------------------------------------------- HTTP rules
def test_wrong_patch_type_is_415_with_accept_patch(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = Writer(app3, engine)
    before = version(engine, service.id)
    for sub in ("env", "resources", "ports"):
        refused = client.patch(f"/services/{service.id}/{sub}", json={"A": "1"})
        assert refused.status_code == 415 and refused.get_json()["code"] == "API004"
        assert refused.headers["Accept-Patch"] == f"{JP}, {MP}"
    not_json = client.patch(f"/services/{service.id}/env", data=b"{", content_type=MP)
    assert not_json.status_code == 400 and not_json.get_json()["code"] == "API008"
    assert client.patch(f"/services/{service.id}/mode", json={}).status_code == 405
    assert version(engine, service.id) == before


def test_prefer_minimal_and_wait(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client, path = Writer(app3, engine), f"/services/{service.id}/env"
    minimal = patch(client, path, {"M": "1"}, MP, Prefer="return=minimal")
    assert minimal.status_code == 204 and minimal.headers["Preference-Applied"] == "return=minimal"
    assert "M=1" in container(engine, service.id)["Env"]
    waited = patch(client, path, {"W": "1"}, MP, Prefer="wait=30")
    body = ok(waited, "ServiceEnv")
    assert body["env"]["W"] == "1" and body["rollout"]["settled"] is True, body
    assert waited.headers["Preference-Applied"] == "wait=30"


def test_if_match_stale_is_412(app3: Any, service: Any, engine: docker.APIClient) -> None:
    client = Writer(app3, engine)
    etag = settled_etag(client, service.id)   # the detail embeds tasks that may still be starting
    assert patch(client, f"/services/{service.id}/labels", {"x": "1"}, MP, **{"If-Match": etag}).status_code == 200
    stale = patch(client, f"/services/{service.id}/labels", {"x": "2"}, MP, **{"If-Match": etag})
    assert stale.status_code == 412 and stale.get_json()["code"] == "SVC001"
    assert spec(engine, service.id)["Labels"]["x"] == "1"
    assert client.put("/services/nope/env", json={}).get_json()["code"] == "SVC003"


# ---------------------------------------------------------------------------------------------- levels
@pytest.fixture(scope="module")
def apps_by_level(docker_host: str, app3: Any) -> Iterator[dict[int, Any]]:
    started = {level: start_runtime_app(docker_host, operations_level=level) for level in (0, 1, 2)}
    yield {**{level: app for level, (app, _) in started.items()}, 3: app3}
    for _, runtime in started.values():
        runtime.stop()


def test_allow_and_accept_patch_follow_the_level(apps_by_level: dict[int, Any], service: Any) -> None:
    for level, app in apps_by_level.items():
        cached(app, f"/services/{service.id}")
        client = app.test_client()
        for sub in TIER2:
            response = client.get(f"/services/{service.id}/{sub}")
            assert response.status_code == 200
            expected = "GET, HEAD, PUT, PATCH" if level >= 2 else "GET, HEAD"
            assert response.headers["Allow"] == expected, (level, sub)
            assert response.headers.get("Accept-Patch") == (f"{JP}, {MP}" if level >= 2 else None), (level, sub)
        for sub in ("mode", "endpoint-mode"):
            response = client.head(f"/services/{service.id}/{sub}")
            assert response.headers["Allow"] == ("GET, HEAD, PUT" if level == 3 else "GET, HEAD"), (level, sub)
            assert "Accept-Patch" not in response.headers


def test_writes_below_their_tier_are_403_ops001(apps_by_level: dict[int, Any], service: Any,
                                                engine: docker.APIClient) -> None:
    before = version(engine, service.id)
    client1, client2 = apps_by_level[1].test_client(), apps_by_level[2].test_client()
    cached(apps_by_level[1], f"/services/{service.id}")
    cached(apps_by_level[2], f"/services/{service.id}")
    for sub in TIER2:
        for response in (client1.put(f"/services/{service.id}/{sub}", json={}),
                         patch(client1, f"/services/{service.id}/{sub}", {}, MP)):
            problem = response.get_json()
            assert response.status_code == 403 and problem["code"] == "OPS001", (sub, problem)
            assert (problem["requiredLevel"], problem["configuredLevel"]) == (2, 1)
    for sub, body in (("mode", {"mode": "replicated", "replicas": 2}), ("endpoint-mode", {"mode": "vip"})):
        response = client2.put(f"/services/{service.id}/{sub}", json=body)
        assert response.status_code == 403 and response.get_json()["code"] == "OPS001"
        assert response.get_json()["requiredLevel"] == 3
    assert version(engine, service.id) == before
