"""The service sub-resource table (``app.writes.service_spec``): getters and setters round-trip on an engine-like
spec, checks name the field with the sub-resource's code, the three patch styles with both patch types, bare and
enveloped PUT bodies, and references resolved by id or name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.errors import ProblemError
from app.resources import ResourceKind
from app.writes.operations import JSON_PATCH, MERGE_PATCH, OPERATIONS, SERVICE_SUBRESOURCES
from app.writes.service_refs import Found
from app.writes.service_spec import SUBRESOURCES, apply, patch_value, put_value, subresource, unwrap

NET_ID, CFG_ID, SEC_ID = "net0000000000000000000001", "cfg0000000000000000000001", "sec0000000000000000000001"


class FakeReferences:
    """Configs, secrets and networks by id or name, as the cache answers them."""

    def __init__(self) -> None:
        self.objects = {
            ResourceKind.CONFIG: [Found(CFG_ID, "app.conf", {})],
            ResourceKind.SECRET: [Found(SEC_ID, "db.password", {})],
            ResourceKind.NETWORK: [Found(NET_ID, "backend", {"Scope": "swarm"}),
                                   Found("ingress00000000000000000001", "ingress", {"Scope": "swarm", "Ingress": True}),
                                   Found("bridge0000000000000000000001", "bridge", {"Scope": "local"})],
        }

    def find(self, kind: ResourceKind, ref: str) -> Found | None:
        return next((f for f in self.objects.get(kind, []) if ref in (f.id, f.name)), None)


KNOWN = FakeReferences()


def engine_spec() -> dict[str, Any]:
    """A service spec as the engine returns it for a stack-deployed service (every member the table touches)."""
    return {
        "Name": "shop_web",
        "Labels": {"com.docker.stack.namespace": "shop", "tier": "web"},
        "TaskTemplate": {
            "ContainerSpec": {
                "Image": "nginx:1.25@sha256:" + "ab" * 32, "Command": ["nginx"], "Args": ["-g", "daemon off;"],
                "Env": ["BARE", "A=1", "URL=http://x/?a=b"], "Init": True, "StopGracePeriod": 10_000_000_000,
                "User": "www", "Hostname": "web", "TTY": True, "StopSignal": "SIGQUIT", "Hosts": ["10.0.0.1 db"],
                "DNSConfig": {"Nameservers": ["10.0.0.53"], "Search": ["svc"], "Options": ["ndots:2"]},
                "Healthcheck": {"Test": ["CMD-SHELL", "curl -f localhost"], "Interval": 5_000_000_000, "Retries": 3},
                "Mounts": [{"Type": "volume", "Source": "shop_data", "Target": "/data",
                            "VolumeOptions": {"Labels": {"com.docker.stack.namespace": "shop"}}}],
                "Configs": [{"File": {"Name": "/etc/app.conf", "UID": "0", "GID": "0", "Mode": 0o400},
                             "ConfigID": CFG_ID, "ConfigName": "app.conf"},
                            {"Runtime": {}, "ConfigID": CFG_ID, "ConfigName": "app.conf"}],
                "Secrets": [{"File": {"Name": "db.password", "UID": "0", "GID": "0", "Mode": 0o444},
                             "SecretID": SEC_ID, "SecretName": "db.password"}],
                "Isolation": "default",
            },
            "Resources": {"Limits": {"NanoCPUs": 500_000_000, "MemoryBytes": 268_435_456},
                          "Reservations": {"MemoryBytes": 67_108_864}},
            "RestartPolicy": {"Condition": "any", "MaxAttempts": 0},
            "Placement": {"Constraints": ["node.role==worker"],
                          "Preferences": [{"Spread": {"SpreadDescriptor": "node.labels.zone"}}],
                          "Platforms": [{"Architecture": "amd64", "OS": "linux"}]},
            "Networks": [{"Target": NET_ID, "Aliases": ["web"], "DriverOpts": {"com.docker.network.x": "1"}}],
            "LogDriver": {"Name": "json-file", "Options": {"max-size": "10m"}},
            "ForceUpdate": 0, "Runtime": "container",
        },
        "Mode": {"Replicated": {"Replicas": 2}},
        "UpdateConfig": {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5_000_000_000,
                         "MaxFailureRatio": 0, "Order": "stop-first"},
        "RollbackConfig": {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5_000_000_000,
                           "MaxFailureRatio": 0, "Order": "stop-first"},
        "EndpointSpec": {"Mode": "vip", "Ports": [{"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 8080,
                                                   "PublishMode": "ingress"}]},
    }


# ---------------------------------------------------------------------------------------------- the table
def test_every_operation_table_subresource_has_a_row_with_its_operations() -> None:
    assert set(SERVICE_SUBRESOURCES) | {"mode", "endpoint-mode"} == set(SUBRESOURCES)
    for sub in SUBRESOURCES.values():
        for name in sub.operations:
            assert OPERATIONS[name].rule == f"/services/<id>/{sub.name}"
    assert subresource("update-policy").jsonld_type == "ServiceUpdatePolicy"
    assert subresource("container-config").jsonld_type == "ServiceContainerConfig"
    assert subresource("env").jsonld_type == "ServiceEnv"
    assert subresource("mode").operations == ("set_service_mode",)


def test_getters_show_the_reference_shapes() -> None:
    spec = engine_spec()
    members = {name: sub.members(spec) for name, sub in SUBRESOURCES.items()}
    assert members["env"] == {"env": {"BARE": "", "A": "1", "URL": "http://x/?a=b"}}
    assert members["resources"]["resources"]["Reservations"] == {"MemoryBytes": 67_108_864}
    assert members["configs"] == {"configs": [{"configID": CFG_ID, "configName": "app.conf",
                                               "fileName": "/etc/app.conf"}]}   # the runtime ref is not a file
    assert members["secrets"] == {"secrets": [{"secretID": SEC_ID, "secretName": "db.password",
                                               "fileName": "db.password"}]}
    assert members["networks"] == {"networks": [{"target": NET_ID, "aliases": ["web"]}]}
    assert members["mode"] == {"mode": "replicated", "replicas": 2}
    assert members["endpoint-mode"] == {"endpointMode": "vip"}
    assert members["healthcheck"]["healthcheck"]["Retries"] == 3
    assert members["log-driver"] == {"logDriver": {"Name": "json-file", "Options": {"max-size": "10m"}}}
    assert members["container-config"]["containerConfig"] == {
        "command": ["nginx"], "args": ["-g", "daemon off;"], "dir": "", "user": "www", "hostname": "web",
        "init": True, "tty": True, "readOnly": False, "stopSignal": "SIGQUIT", "stopGracePeriod": 10_000_000_000,
        "capabilityAdd": [], "capabilityDrop": [], "groups": [], "hosts": ["10.0.0.1 db"],
        "dnsConfig": {"nameservers": ["10.0.0.53"], "search": ["svc"], "options": ["ndots:2"]}}
    empty = {"TaskTemplate": {"ContainerSpec": {"Image": "x"}}}
    assert SUBRESOURCES["healthcheck"].members(empty) == {"healthcheck": None}
    assert SUBRESOURCES["resources"].members(empty) == {"resources": {"Limits": {}, "Reservations": {}}}
    assert SUBRESOURCES["endpoint-mode"].members(empty) == {"endpointMode": ""}
    assert SUBRESOURCES["mode"].members({"Mode": {"Global": {}}}) == {"mode": "global", "replicas": None}


@pytest.mark.parametrize("name", sorted(SUBRESOURCES))
def test_put_of_the_get_changes_nothing(name: str) -> None:
    """GET → PUT round-trips: the value reads back the same and the spec is unchanged (owner and mode of
    config files, driver options of networks, runtime config refs kept)."""
    sub = subresource(name)
    spec = engine_spec()
    value = put_value(sub, copy.deepcopy(sub.members(spec)), KNOWN)
    written = copy.deepcopy(spec)
    apply(sub, written, value)
    assert sub.members(written) == sub.members(spec)
    assert written == spec


def test_setters_write_engine_shapes() -> None:
    spec = engine_spec()
    configs = subresource("configs")
    apply(configs, spec, put_value(configs, [{"configName": "app.conf", "fileName": "/etc/other.conf"}], KNOWN))
    container = spec["TaskTemplate"]["ContainerSpec"]
    assert container["Configs"] == [
        {"File": {"Name": "/etc/other.conf", "UID": "0", "GID": "0", "Mode": 0o444}, "ConfigID": CFG_ID,
         "ConfigName": "app.conf"},
        {"Runtime": {}, "ConfigID": CFG_ID, "ConfigName": "app.conf"}]
    networks = subresource("networks")
    spec["Networks"] = [{"Target": NET_ID}]   # the deprecated place: written once, under TaskTemplate
    apply(networks, spec, put_value(networks, {"networks": [{"target": "backend"}]}, KNOWN))
    assert spec["TaskTemplate"]["Networks"] == [{"Target": NET_ID, "DriverOpts": {"com.docker.network.x": "1"}}]
    assert "Networks" not in spec
    healthcheck = subresource("healthcheck")
    spec["TaskTemplate"]["ContainerSpec"]["HealthCheck"] = {"Test": ["NONE"]}
    apply(healthcheck, spec, None)
    assert "Healthcheck" not in container and "HealthCheck" not in container
    config = subresource("container-config")
    apply(config, spec, put_value(config, {"command": ["sh"]}, KNOWN))   # the rest back to defaults
    assert {k: v for k, v in container.items() if k not in ("Configs", "Secrets", "Mounts")} == {
        "Image": "nginx:1.25@sha256:" + "ab" * 32, "Command": ["sh"], "Env": ["BARE", "A=1", "URL=http://x/?a=b"],
        "Isolation": "default"}
    mode = subresource("mode")
    apply(mode, spec, put_value(mode, {"mode": "global"}, KNOWN))
    assert spec["Mode"] == {"Global": {}}
    env = subresource("env")
    apply(env, spec, put_value(env, {"BARE": "", "A": "2", "NEW": ""}, KNOWN))
    assert container["Env"] == ["BARE", "A=2", "NEW="]


# ---------------------------------------------------------------------------------------------- PUT bodies
def test_put_bodies_bare_or_enveloped() -> None:
    env = subresource("env")
    assert unwrap(env, {"@context": "/api/context.jsonld", "@id": "/services/x/env", "@type": "ServiceEnv",
                        "env": {"A": "1"}}) == {"A": "1"}
    assert unwrap(env, {"env": "a variable named env"}) == {"env": "a variable named env"}
    assert unwrap(subresource("healthcheck"), {"healthcheck": None}) is None
    assert unwrap(subresource("ports"), {"ports": [{"TargetPort": 80}]}) == [{"TargetPort": 80}]
    assert unwrap(subresource("ports"), [{"TargetPort": 80}]) == [{"TargetPort": 80}]
    assert unwrap(subresource("mode"), {"@type": "ServiceMode", "mode": "global", "replicas": None}) == \
        {"mode": "global", "replicas": None}
    assert put_value(subresource("ports"), [{"TargetPort": 80}], KNOWN) == \
        [{"TargetPort": 80, "Protocol": "tcp", "PublishMode": "ingress"}]
    assert put_value(subresource("endpoint-mode"), {"endpointMode": "dnsrr"}, KNOWN) == {"endpointMode": "dnsrr"}
    assert put_value(subresource("endpoint-mode"), {"mode": "vip"}, KNOWN) == {"endpointMode": "vip"}


BAD_VALUES: list[tuple[str, Any, str, str]] = [
    ("env", {"A": 1}, "API006", "env.A"),
    ("env", {"A=B": "1"}, "API006", "env.A=B"),
    ("env", ["A=1"], "API006", "env"),
    ("labels", {"a": None}, "API006", "labels.a"),
    ("resources", {"Limits": {"MemoryBytes": -1}}, "SVC011", "resources.Limits.MemoryBytes"),
    ("resources", {"Limits": {"MemoryBytes": 1024}}, "SVC011", "resources.Limits.MemoryBytes"),
    ("resources", {"Limits": {"NanoCPUs": 1}, "Reservations": {"NanoCPUs": 2}}, "SVC011",
     "resources.Reservations.NanoCPUs"),
    ("resources", {"Limit": {}}, "SVC011", "resources.Limit"),
    ("placement", {"Constraints": ["node.role"]}, "API006", "placement.Constraints[0]"),
    ("placement", {"Preferences": [{"Spread": {}}]}, "API006", "placement.Preferences[0].Spread.SpreadDescriptor"),
    ("ports", [{"TargetPort": 0}], "API006", "ports[0].TargetPort"),
    ("ports", [{"TargetPort": 80, "Protocol": "icmp"}], "API006", "ports[0].Protocol"),
    ("ports", [{"TargetPort": 80, "PublishedPort": 8080}, {"TargetPort": 81, "PublishedPort": 8080}], "API006",
     "ports[1].PublishedPort"),
    ("update-policy", {"FailureAction": "explode"}, "SVC012", "updatePolicy.FailureAction"),
    ("update-policy", {"MaxFailureRatio": 2}, "SVC012", "updatePolicy.MaxFailureRatio"),
    ("update-policy", {"Parallelism": True}, "SVC012", "updatePolicy.Parallelism"),
    ("rollback-policy", {"FailureAction": "rollback"}, "SVC013", "rollbackPolicy.FailureAction"),
    ("log-driver", {"Options": {}}, "SVC019", "logDriver.Name"),
    ("log-driver", {"Name": "json-file", "Options": {"max-file": 3}}, "SVC019", "logDriver.Options.max-file"),
    ("healthcheck", {"Test": ["CURL", "x"]}, "SVC014", "healthcheck.Test[0]"),
    ("healthcheck", {"Test": ["CMD-SHELL"]}, "SVC014", "healthcheck.Test"),
    ("healthcheck", {"Timeout": 10}, "SVC014", "healthcheck.Timeout"),
    ("container-config", {"init": "yes"}, "SVC018", "containerConfig.init"),
    ("container-config", {"command": "sh -c x"}, "SVC018", "containerConfig.command"),
    ("container-config", {"dnsConfig": {"servers": []}}, "SVC018", "containerConfig.dnsConfig.servers"),
    ("container-config", {"Image": "x"}, "SVC018", "containerConfig.Image"),
    ("configs", [{"fileName": "/x"}], "SVC015", "configs[0]"),
    ("configs", [{"configName": "nope"}], "SVC015", "configs[0].configName"),
    ("configs", [{"configID": CFG_ID, "configName": "other"}], "SVC015", "configs[0].configName"),
    ("configs", [{"configName": "app.conf"}, {"configID": CFG_ID}], "SVC015", "configs[1].fileName"),
    ("secrets", [{"secretID": "nope"}], "SVC016", "secrets[0].secretID"),
    ("secrets", None, "SVC016", "secrets"),
    ("networks", [{"aliases": ["a"]}], "SVC017", "networks[0].target"),
    ("networks", [{"target": "nope"}], "SVC017", "networks[0].target"),
    ("networks", [{"target": "ingress"}], "SVC017", "networks[0].target"),
    ("networks", [{"target": "bridge"}], "SVC017", "networks[0].target"),
    ("networks", [{"target": "backend"}, {"target": NET_ID}], "SVC017", "networks[1].target"),
    ("mounts", [{"Type": "bind", "Target": "/x"}], "API006", "mounts[0].Source"),
    ("mounts", [{"Type": "tmpfs", "Source": "x", "Target": "/x"}], "API006", "mounts[0].Source"),
    ("mounts", [{"Type": "volume"}], "API006", "mounts[0].Target"),
    ("mounts", [{"Type": "volume", "Target": "/x"}, {"Target": "/x"}], "API006", "mounts[1].Target"),
    ("mode", {"mode": "daemon"}, "SVC008", "mode"),
    ("mode", {"mode": "replicated"}, "SVC009", "replicas"),
    ("mode", {"mode": "replicated", "replicas": "3"}, "SVC009", "replicas"),
    ("mode", {"mode": "global", "replicas": 2}, "SVC008", "replicas"),
    ("endpoint-mode", {"mode": "rr"}, "SVC010", "mode"),
]


@pytest.mark.parametrize(("name", "value", "code", "field"), BAD_VALUES)
def test_bad_values_name_the_field_with_the_code(name: str, value: Any, code: str, field: str) -> None:
    with pytest.raises(ProblemError) as raised:
        put_value(subresource(name), value, KNOWN)
    assert (raised.value.code, raised.value.status, raised.value.extra["field"]) == (code, 400, field)
    assert raised.value.detail.startswith(field)


def test_file_references_resolve_by_id_or_name_with_default_file_names() -> None:
    assert put_value(subresource("configs"), [{"configID": CFG_ID}], KNOWN) == \
        [{"configID": CFG_ID, "configName": "app.conf", "fileName": "/app.conf"}]
    assert put_value(subresource("secrets"), {"secrets": [{"secretName": "db.password"}]}, KNOWN) == \
        [{"secretID": SEC_ID, "secretName": "db.password", "fileName": "/run/secrets/db.password"}]
    assert put_value(subresource("networks"), [{"target": "backend", "aliases": []}], KNOWN) == [{"target": NET_ID}]


# ---------------------------------------------------------------------------------------------- PATCH styles
def test_map_style_follows_the_reference_rules() -> None:
    spec, env = engine_spec(), subresource("env")
    assert patch_value(env, spec, JSON_PATCH, [{"op": "add", "path": "B", "value": "2"},
                                               {"op": "remove", "path": "/A"}], KNOWN) == \
        {"BARE": "", "URL": "http://x/?a=b", "B": "2"}
    assert patch_value(env, spec, MERGE_PATCH, {"A": None, "C": "3"}, KNOWN) == \
        {"BARE": "", "URL": "http://x/?a=b", "C": "3"}
    assert patch_value(env, spec, MERGE_PATCH, {"env": {"A": None}}, KNOWN) == {"BARE": "", "URL": "http://x/?a=b"}
    for operations, code in (([{"op": "test", "path": "/A", "value": "2"}], "API010"),
                             ([{"op": "move", "from": "/A", "path": "/B"}], "API011"),
                             ([{"op": "copy", "from": "/A", "path": "/B"}], "API011"),
                             ([{"op": "replace", "path": "/NOPE", "value": "1"}], "API011"),
                             ([{"op": "add", "path": "", "value": "1"}], "API011")):
        with pytest.raises(ProblemError) as raised:
            patch_value(env, spec, JSON_PATCH, operations, KNOWN)
        assert raised.value.code == code, operations
    labels = subresource("labels")
    assert patch_value(labels, spec, JSON_PATCH, [{"op": "add", "path": "/a~1b", "value": "c"}], KNOWN)["a/b"] == "c"


def test_object_style_merges_and_applies_rfc_6902() -> None:
    spec, resources = engine_spec(), subresource("resources")
    assert patch_value(resources, spec, MERGE_PATCH, {"Limits": {"NanoCPUs": None, "Pids": 100}}, KNOWN) == \
        {"Limits": {"MemoryBytes": 268_435_456, "Pids": 100}, "Reservations": {"MemoryBytes": 67_108_864}}
    assert patch_value(resources, spec, MERGE_PATCH, {"resources": {"Reservations": None}}, KNOWN)["Reservations"] \
        == {}
    moved = patch_value(resources, spec, JSON_PATCH, [{"op": "move", "from": "/Reservations/MemoryBytes",
                                                       "path": "/Reservations/NanoCPUs"}], KNOWN)
    assert moved["Reservations"] == {"NanoCPUs": 67_108_864}   # RFC 6902 in full over objects
    healthcheck = subresource("healthcheck")
    assert patch_value(healthcheck, spec, MERGE_PATCH, None, KNOWN) is None
    assert patch_value(healthcheck, {"TaskTemplate": {}}, MERGE_PATCH, {"Test": ["NONE"]}, KNOWN) == \
        {"Test": ["NONE"]}
    with pytest.raises(ProblemError) as raised:
        patch_value(healthcheck, spec, JSON_PATCH, [{"op": "test", "path": "/Retries", "value": 4}], KNOWN)
    assert raised.value.code == "API010" and raised.value.status == 409
    with pytest.raises(ProblemError) as raised:   # the patched value is checked as a whole
        patch_value(subresource("update-policy"), spec, MERGE_PATCH, {"Order": "random"}, KNOWN)
    assert raised.value.code == "SVC012"


def test_list_style_replaces_with_merge_patch_and_edits_with_json_patch() -> None:
    spec, ports = engine_spec(), subresource("ports")
    new = [{"TargetPort": 443, "PublishedPort": 8443, "Protocol": "tcp", "PublishMode": "host"}]
    assert patch_value(ports, spec, MERGE_PATCH, {"ports": new}, KNOWN) == new
    assert patch_value(ports, spec, MERGE_PATCH, new, KNOWN) == new
    assert patch_value(ports, spec, JSON_PATCH, [{"op": "add", "path": "/-", "value": new[0]}], KNOWN) == \
        [spec["EndpointSpec"]["Ports"][0], new[0]]
    with pytest.raises(ProblemError) as raised:
        patch_value(ports, spec, MERGE_PATCH, {"TargetPort": 80}, KNOWN)
    assert raised.value.code == "API006" and raised.value.extra["field"] == "ports"
    with pytest.raises(ProblemError) as raised:
        patch_value(ports, spec, JSON_PATCH, [{"op": "remove", "path": "/3"}], KNOWN)
    assert raised.value.code == "API011"
    configs = subresource("configs")
    assert patch_value(configs, spec, JSON_PATCH, [{"op": "replace", "path": "/0/fileName", "value": "/c"}],
                       KNOWN) == [{"configID": CFG_ID, "configName": "app.conf", "fileName": "/c"}]


def test_mode_and_endpoint_mode_have_no_patch() -> None:
    with pytest.raises(ValueError):
        patch_value(subresource("mode"), engine_spec(), MERGE_PATCH, {"mode": "global"}, KNOWN)
