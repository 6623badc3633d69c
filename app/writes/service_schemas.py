"""JSON Schemas (2020-12, as OpenAPI 3.1 uses) of the service sub-resource values, for the API document and
the agent tools' input schemas. Descriptive only: ``app.writes.service_spec`` checks the values itself and
answers problems that name the field; these schemas say what it accepts, without refusing more than it does.
"""

from __future__ import annotations

from typing import Any

_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_NS: dict[str, Any] = {"type": "integer", "minimum": 0, "description": "nanoseconds"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_OBJECT: dict[str, Any] = {"type": "object"}


def _object(properties: dict[str, Any], *, nullable: bool = False, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["object", "null"] if nullable else "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _policy(actions: tuple[str, ...]) -> dict[str, Any]:
    return _object({"Parallelism": _COUNT, "Delay": _NS, "FailureAction": {"enum": list(actions)},
                    "Monitor": _NS, "MaxFailureRatio": {"type": "number", "minimum": 0, "maximum": 1},
                    "Order": {"enum": ["stop-first", "start-first"]}})


def _file_refs(id_key: str, name_key: str) -> dict[str, Any]:
    return {"type": "array", "items": _object({id_key: {"type": "string"}, name_key: {"type": "string"},
                                               "fileName": {"type": "string"}})}


_DNS = _object({"nameservers": _STRINGS, "search": _STRINGS, "options": _STRINGS}, nullable=True)

VALUE_SCHEMAS: dict[str, dict[str, Any]] = {
    "env": _STRING_MAP,
    "labels": _STRING_MAP,
    "resources": _object({
        "Limits": _object({"NanoCPUs": _COUNT, "MemoryBytes": _COUNT, "Pids": _COUNT}),
        "Reservations": _object({"NanoCPUs": _COUNT, "MemoryBytes": _COUNT,
                                 "GenericResources": {"type": "array", "items": _OBJECT}})}),
    "placement": _object({
        "Constraints": {**_STRINGS, "description": "<key>==<value> or <key>!=<value>"},
        "Preferences": {"type": "array",
                        "items": _object({"Spread": _object({"SpreadDescriptor": {"type": "string"}})})},
        "MaxReplicas": _COUNT,
        "Platforms": {"type": "array",
                      "items": _object({"Architecture": {"type": "string"}, "OS": {"type": "string"}})}}),
    "ports": {"type": "array", "items": _object({
        "Name": {"type": "string"}, "Protocol": {"enum": ["tcp", "udp", "sctp"]},
        "TargetPort": {"type": "integer", "minimum": 1, "maximum": 65535},
        "PublishedPort": {"type": "integer", "minimum": 0, "maximum": 65535},
        "PublishMode": {"enum": ["ingress", "host"]}}, required=("TargetPort",))},
    "update-policy": _policy(("pause", "continue", "rollback")),
    "rollback-policy": _policy(("pause", "continue")),
    "log-driver": _object({"Name": {"type": "string"}, "Options": _STRING_MAP}, nullable=True),
    "healthcheck": _object({"Test": {**_STRINGS, "description": "[] (image default), [NONE], [CMD, ...] or "
                                                                "[CMD-SHELL, command]"},
                            "Interval": _NS, "Timeout": _NS, "StartPeriod": _NS, "StartInterval": _NS,
                            "Retries": _COUNT}, nullable=True),
    "container-config": _object({
        "command": _STRINGS, "args": _STRINGS, "dir": {"type": "string"}, "user": {"type": "string"},
        "hostname": {"type": "string"}, "init": {"type": ["boolean", "null"]}, "tty": {"type": "boolean"},
        "readOnly": {"type": "boolean"}, "stopSignal": {"type": "string"},
        "stopGracePeriod": {"type": ["integer", "null"], "minimum": 0, "description": "nanoseconds"},
        "capabilityAdd": _STRINGS, "capabilityDrop": _STRINGS, "groups": _STRINGS,
        "hosts": {**_STRINGS, "description": "\"<ip> <hostname> [aliases...]\""}, "dnsConfig": _DNS}),
    "configs": _file_refs("configID", "configName"),
    "secrets": _file_refs("secretID", "secretName"),
    "networks": {"type": "array", "items": _object({"target": {"type": "string"}, "aliases": _STRINGS},
                                                   required=("target",))},
    "mounts": {"type": "array", "items": _object({
        "Type": {"enum": ["bind", "volume", "tmpfs", "npipe", "cluster"]}, "Source": {"type": "string"},
        "Target": {"type": "string"}, "ReadOnly": {"type": "boolean"}, "Consistency": {"type": "string"},
        "BindOptions": _OBJECT, "VolumeOptions": _OBJECT, "TmpfsOptions": _OBJECT, "ClusterOptions": _OBJECT},
        required=("Target",))},
}

# The members of mode / endpoint-mode bodies (their values are the whole body, not one key).
MODE_SCHEMA = _object({"mode": {"enum": ["replicated", "global", "replicated-job", "global-job"]},
                       "replicas": {"type": ["integer", "null"], "minimum": 0}}, required=("mode",))
MODE_BODY = _object({"mode": {"enum": ["replicated", "global"]},
                     "replicas": {"type": ["integer", "null"], "minimum": 0,
                                  "description": "required for replicated, null or absent for global"}},
                    required=("mode",))
ENDPOINT_MODE_SCHEMA = _object({"endpointMode": {"enum": ["vip", "dnsrr", ""]}}, required=("endpointMode",))
ENDPOINT_MODE_BODY = _object({"mode": {"enum": ["vip", "dnsrr"]},
                              "endpointMode": {"enum": ["vip", "dnsrr"], "description": "as the GET shows it"}})
