"""Getters, checks and setters of the service sub-resources that live in the spec alone (no references).

Each sub-resource has three functions over the engine's service ``Spec`` dict:

- ``get_<sub>(spec)`` — the value as ``GET /services/{id}/<sub>`` shows it (docs/writes-services.md);
- ``check_<sub>(value)`` — the whole value checked and normalised, or a ``ProblemError`` naming the field
  (raised before any engine call, so nothing is half-applied);
- ``set_<sub>(spec, value)`` — the checked value written into the spec, in the engine's shape; an empty
  value removes the spec member so the engine's default applies.

The table that ties them to URLs, response keys and patch styles is ``app.writes.service_spec``.
"""

from __future__ import annotations

from typing import Any

from app.writes.service_checks import (
    as_bool,
    as_choice,
    as_duration,
    as_int,
    as_list,
    as_number,
    as_object,
    as_str,
    as_string_map,
    as_strings,
    invalid,
    join,
    only_keys,
    without_nulls,
)

Spec = dict[str, Any]
BODY = "API006"          # sub-resources without a code of their own: the generic invalid-body code
MIN_HEALTH_DURATION = 1_000_000          # the engine refuses healthcheck durations under 1 ms (other than 0)
MIN_MEMORY_LIMIT = 6 * 1024 * 1024       # the engine refuses memory limits under 6 MiB


# ---------------------------------------------------------------------------------------------- spec access
def template(spec: Spec) -> dict[str, Any]:
    return spec.get("TaskTemplate") or {}


def container(spec: Spec) -> dict[str, Any]:
    return template(spec).get("ContainerSpec") or {}


def template_for_write(spec: Spec) -> dict[str, Any]:
    holder: dict[str, Any] = spec.setdefault("TaskTemplate", {})
    return holder


def container_for_write(spec: Spec) -> dict[str, Any]:
    holder: dict[str, Any] = template_for_write(spec).setdefault("ContainerSpec", {})
    return holder


def put_or_drop(holder: dict[str, Any], key: str, value: Any) -> None:
    """Write ``value``, or remove the member when it is empty (the engine's default then applies)."""
    if value is None or value == {} or value == []:
        holder.pop(key, None)
    else:
        holder[key] = value


# ---------------------------------------------------------------------------------------------- env, labels
def get_env(spec: Spec) -> dict[str, str]:
    """``K=V`` entries as a map; a bare ``K`` reads as ``""``."""
    env: dict[str, str] = {}
    for item in container(spec).get("Env") or []:
        key, _, value = str(item).partition("=")
        env[key] = value
    return env


def check_env(value: Any) -> dict[str, str]:
    """Names without ``=`` or control characters, values without NUL: the engine stores any
    string, but a container's environment is C strings (a NUL cuts the entry, ``=`` ends the name), so such
    a variable would not be what was asked for, or the task would not start."""
    env = as_string_map(value, BODY, "env")
    for key, item in env.items():
        field = join("env", _printable(key))
        if "=" in key:
            raise invalid(BODY, field, "a variable name cannot contain '='.")
        if any(_is_control(char) for char in key):
            raise invalid(BODY, field, "a variable name cannot contain control characters (NUL included).")
        if "\x00" in item:
            raise invalid(BODY, field, "a value cannot contain a NUL character.")
    return env


def _is_control(char: str) -> bool:
    return ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0


def _printable(key: str) -> str:
    """A name as a problem shows it: control characters escaped, at most 80 characters."""
    shown = "".join(f"\\x{ord(c):02x}" if _is_control(c) else c for c in key[:80])
    return shown + ("…" if len(key) > 80 else "")


def set_env(spec: Spec, value: dict[str, str]) -> None:
    """Order kept (new names last); a bare ``K`` that is still ``""`` stays bare."""
    holder = container_for_write(spec)
    bare = {item for item in holder.get("Env") or [] if "=" not in item}
    put_or_drop(holder, "Env", [key if item == "" and key in bare else f"{key}={item}"
                                for key, item in value.items()])


def get_labels(spec: Spec) -> dict[str, str]:
    return dict(spec.get("Labels") or {})


def check_labels(value: Any) -> dict[str, str]:
    return as_string_map(value, BODY, "labels")


def set_labels(spec: Spec, value: dict[str, str]) -> None:
    spec["Labels"] = dict(value)


# ---------------------------------------------------------------------------------------------- resources
_LIMITS = ("NanoCPUs", "MemoryBytes", "Pids")
_RESERVATIONS = ("NanoCPUs", "MemoryBytes", "GenericResources")


def get_resources(spec: Spec) -> dict[str, Any]:
    resources = template(spec).get("Resources") or {}
    return {"Limits": dict(resources.get("Limits") or {}), "Reservations": dict(resources.get("Reservations") or {})}


def check_resources(value: Any) -> dict[str, Any]:
    code, field = "SVC011", "resources"
    body = without_nulls(as_object({} if value is None else value, code, field))
    only_keys(body, ("Limits", "Reservations"), code, field)
    checked: dict[str, dict[str, Any]] = {}
    for part, known in (("Limits", _LIMITS), ("Reservations", _RESERVATIONS)):
        where = join(field, part)
        members = without_nulls(as_object(body.get(part) or {}, code, where))
        only_keys(members, known, code, where)
        for key, item in members.items():
            if key == "GenericResources":
                for index, resource in enumerate(as_list(item, code, join(where, key))):
                    as_object(resource, code, f"{join(where, key)}[{index}]")
            else:
                as_int(item, code, join(where, key))
        checked[part] = members
    memory = checked["Limits"].get("MemoryBytes", 0)
    if 0 < memory < MIN_MEMORY_LIMIT:
        raise invalid(code, "resources.Limits.MemoryBytes", f"must be 0 (no limit) or at least {MIN_MEMORY_LIMIT}.")
    for key in ("NanoCPUs", "MemoryBytes"):
        limit, reserved = checked["Limits"].get(key, 0), checked["Reservations"].get(key, 0)
        if limit and reserved > limit:
            raise invalid(code, f"resources.Reservations.{key}", f"reserves {reserved}, more than the limit {limit}.")
    return checked


def set_resources(spec: Spec, value: dict[str, Any]) -> None:
    put_or_drop(template_for_write(spec), "Resources", {part: items for part, items in value.items() if items})


# ---------------------------------------------------------------------------------------------- healthcheck
_HEALTH_DURATIONS = ("Interval", "Timeout", "StartPeriod", "StartInterval")


def get_healthcheck(spec: Spec) -> dict[str, Any] | None:
    """The engine writes ``Healthcheck`` (and reads either spelling: its JSON decoding ignores case)."""
    engine = container(spec)
    check = engine.get("Healthcheck") or engine.get("HealthCheck")
    return dict(check) if check else None


def check_healthcheck(value: Any) -> dict[str, Any] | None:
    code, field = "SVC014", "healthcheck"
    if value is None:
        return None
    body = without_nulls(as_object(value, code, field))
    only_keys(body, ("Test", *_HEALTH_DURATIONS, "Retries"), code, field)
    test = as_strings(body.get("Test", []), code, "healthcheck.Test")
    if test:
        kind = as_choice(test[0], ("NONE", "CMD", "CMD-SHELL"), code, "healthcheck.Test[0]")
        if kind != "NONE" and len(test) < 2:
            raise invalid(code, "healthcheck.Test", f"{kind} needs a command after it.")
    for key in _HEALTH_DURATIONS:
        if key in body:
            duration = as_duration(body[key], code, join(field, key))
            if 0 < duration < MIN_HEALTH_DURATION:
                raise invalid(code, join(field, key), "must be 0 (default) or at least 1 ms (1000000 ns).")
    if "Retries" in body:
        as_int(body["Retries"], code, "healthcheck.Retries")
    return body or None


def set_healthcheck(spec: Spec, value: dict[str, Any] | None) -> None:
    holder = container_for_write(spec)
    holder.pop("HealthCheck", None)
    put_or_drop(holder, "Healthcheck", value)


# ---------------------------------------------------------------------------------------------- placement
def get_placement(spec: Spec) -> dict[str, Any]:
    return dict(template(spec).get("Placement") or {})


def check_placement(value: Any) -> dict[str, Any]:
    field = "placement"
    body = without_nulls(as_object({} if value is None else value, BODY, field))
    only_keys(body, ("Constraints", "Preferences", "MaxReplicas", "Platforms"), BODY, field)
    for index, constraint in enumerate(as_strings(body.get("Constraints", []), BODY, "placement.Constraints")):
        name, operator, wanted = constraint.partition("==") if "==" in constraint else constraint.partition("!=")
        if not operator or not name.strip() or not wanted.strip():
            raise invalid(BODY, f"placement.Constraints[{index}]",
                          f"{constraint!r} is not <key>==<value> or <key>!=<value>.")
    for index, preference in enumerate(as_list(body.get("Preferences", []), BODY, "placement.Preferences")):
        where = f"placement.Preferences[{index}]"
        only_keys(as_object(preference, BODY, where), ("Spread",), BODY, where)
        spread = as_object(preference.get("Spread"), BODY, f"{where}.Spread")
        only_keys(spread, ("SpreadDescriptor",), BODY, f"{where}.Spread")
        as_str(spread.get("SpreadDescriptor"), BODY, f"{where}.Spread.SpreadDescriptor", nonempty=True)
    if "MaxReplicas" in body:
        as_int(body["MaxReplicas"], BODY, "placement.MaxReplicas")
    for index, platform in enumerate(as_list(body.get("Platforms", []), BODY, "placement.Platforms")):
        where = f"placement.Platforms[{index}]"
        only_keys(as_object(platform, BODY, where), ("Architecture", "OS"), BODY, where)
        for key, item in platform.items():
            as_str(item, BODY, join(where, key))
    return body


def set_placement(spec: Spec, value: dict[str, Any]) -> None:
    placement = {key: item for key, item in value.items() if item not in ([], 0)}
    put_or_drop(template_for_write(spec), "Placement", placement)


# ---------------------------------------------------------------------------------------------- ports
_PORT_KEYS = ("Name", "Protocol", "TargetPort", "PublishedPort", "PublishMode")


def get_ports(spec: Spec) -> list[dict[str, Any]]:
    return [dict(port) for port in (spec.get("EndpointSpec") or {}).get("Ports") or []]


def check_ports(value: Any) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = []
    published: set[tuple[int, str]] = set()
    for index, item in enumerate(as_list(value, BODY, "ports")):
        where = f"ports[{index}]"
        port = without_nulls(as_object(item, BODY, where))
        only_keys(port, _PORT_KEYS, BODY, where)
        if "TargetPort" not in port:
            raise invalid(BODY, f"{where}.TargetPort", "is required.")
        as_int(port["TargetPort"], BODY, f"{where}.TargetPort", minimum=1, maximum=65535)
        public = as_int(port.get("PublishedPort", 0), BODY, f"{where}.PublishedPort", maximum=65535)
        protocol = as_choice(port.setdefault("Protocol", "tcp"), ("tcp", "udp", "sctp"), BODY, f"{where}.Protocol")
        as_choice(port.setdefault("PublishMode", "ingress"), ("ingress", "host"), BODY, f"{where}.PublishMode")
        if "Name" in port:
            as_str(port["Name"], BODY, f"{where}.Name")
        if public and (public, protocol) in published:
            raise invalid(BODY, f"{where}.PublishedPort", f"{public}/{protocol} is published twice.")
        published.add((public, protocol))
        ports.append(port)
    return ports


def set_ports(spec: Spec, value: list[dict[str, Any]]) -> None:
    put_or_drop(spec.setdefault("EndpointSpec", {}), "Ports", value)


# ---------------------------------------------------------------------------------------------- update, rollback
def _policy_checker(code: str, field: str, failure_actions: tuple[str, ...]) -> Any:
    def check(value: Any) -> dict[str, Any]:
        body = without_nulls(as_object({} if value is None else value, code, field))
        only_keys(body, ("Parallelism", "Delay", "FailureAction", "Monitor", "MaxFailureRatio", "Order"), code, field)
        for key in ("Parallelism", "Delay", "Monitor"):
            if key in body:
                as_int(body[key], code, join(field, key))
        if "FailureAction" in body:
            as_choice(body["FailureAction"], failure_actions, code, join(field, "FailureAction"))
        if "MaxFailureRatio" in body:
            as_number(body["MaxFailureRatio"], code, join(field, "MaxFailureRatio"), minimum=0, maximum=1)
        if "Order" in body:
            as_choice(body["Order"], ("stop-first", "start-first"), code, join(field, "Order"))
        return body
    return check


check_update_policy = _policy_checker("SVC012", "updatePolicy", ("pause", "continue", "rollback"))
check_rollback_policy = _policy_checker("SVC013", "rollbackPolicy", ("pause", "continue"))


def get_update_policy(spec: Spec) -> dict[str, Any]:
    return dict(spec.get("UpdateConfig") or {})


def set_update_policy(spec: Spec, value: dict[str, Any]) -> None:
    put_or_drop(spec, "UpdateConfig", value)


def get_rollback_policy(spec: Spec) -> dict[str, Any]:
    return dict(spec.get("RollbackConfig") or {})


def set_rollback_policy(spec: Spec, value: dict[str, Any]) -> None:
    put_or_drop(spec, "RollbackConfig", value)


# ---------------------------------------------------------------------------------------------- log driver
def get_log_driver(spec: Spec) -> dict[str, Any] | None:
    driver = template(spec).get("LogDriver")
    return dict(driver) if driver else None


def check_log_driver(value: Any) -> dict[str, Any] | None:
    code, field = "SVC019", "logDriver"
    if value is None:
        return None
    body = without_nulls(as_object(value, code, field))
    if not body:
        return None
    only_keys(body, ("Name", "Options"), code, field)
    as_str(body.get("Name"), code, "logDriver.Name", nonempty=True)
    if "Options" in body:
        body["Options"] = as_string_map(body["Options"], code, "logDriver.Options")
    return body


def set_log_driver(spec: Spec, value: dict[str, Any] | None) -> None:
    put_or_drop(template_for_write(spec), "LogDriver", value)


# ---------------------------------------------------------------------------------------------- mounts
_MOUNT_TYPES = ("bind", "volume", "tmpfs", "npipe", "cluster")
_MOUNT_KEYS = ("Type", "Source", "Target", "ReadOnly", "Consistency", "BindOptions", "VolumeOptions",
               "TmpfsOptions", "ClusterOptions")


def get_mounts(spec: Spec) -> list[dict[str, Any]]:
    return [dict(mount) for mount in container(spec).get("Mounts") or []]


def check_mounts(value: Any) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = []
    targets: set[str] = set()
    for index, item in enumerate(as_list(value, BODY, "mounts")):
        where = f"mounts[{index}]"
        mount = without_nulls(as_object(item, BODY, where))
        only_keys(mount, _MOUNT_KEYS, BODY, where)
        kind = as_choice(mount.get("Type", "volume"), _MOUNT_TYPES, BODY, f"{where}.Type")
        mount["Type"] = kind
        target = as_str(mount.get("Target"), BODY, f"{where}.Target", nonempty=True)
        if kind != "npipe" and not target.startswith("/"):
            raise invalid(BODY, f"{where}.Target", f"must be an absolute path, not {target!r}.")
        if target in targets:
            raise invalid(BODY, f"{where}.Target", f"{target} is mounted twice.")
        targets.add(target)
        source = as_str(mount.get("Source", ""), BODY, f"{where}.Source")
        if kind == "bind" and not source:
            raise invalid(BODY, f"{where}.Source", "a bind mount needs a source path.")
        if kind == "tmpfs" and source:
            raise invalid(BODY, f"{where}.Source", "a tmpfs mount has no source.")
        if "ReadOnly" in mount:
            as_bool(mount["ReadOnly"], BODY, f"{where}.ReadOnly")
        for key in ("BindOptions", "VolumeOptions", "TmpfsOptions", "ClusterOptions"):
            if key in mount:
                as_object(mount[key], BODY, join(where, key))
        mounts.append(mount)
    return mounts


def set_mounts(spec: Spec, value: list[dict[str, Any]]) -> None:
    put_or_drop(container_for_write(spec), "Mounts", value)


# ---------------------------------------------------------------------------------------------- mode
MODES = ("replicated", "global")


def get_mode(spec: Spec) -> dict[str, Any]:
    """``{mode, replicas}``; jobs read as ``replicated-job`` / ``global-job`` with ``replicas`` null."""
    mode = spec.get("Mode") or {}
    if "Replicated" in mode:
        return {"mode": "replicated", "replicas": int((mode["Replicated"] or {}).get("Replicas") or 0)}
    if "Global" in mode:
        return {"mode": "global", "replicas": None}
    if "ReplicatedJob" in mode:
        return {"mode": "replicated-job", "replicas": None}
    if "GlobalJob" in mode:
        return {"mode": "global-job", "replicas": None}
    return {"mode": "replicated", "replicas": 1}


def check_mode(value: Any) -> dict[str, Any]:
    body = as_object(value, "SVC008", "mode")
    mode = as_choice(body.get("mode"), MODES, "SVC008", "mode")
    replicas = body.get("replicas")
    if mode == "replicated":
        if replicas is None:
            raise invalid("SVC009", "replicas", "replicated mode needs replicas (a non-negative integer).")
        return {"mode": mode, "replicas": as_int(replicas, "SVC009", "replicas")}
    if replicas is not None:
        raise invalid("SVC008", "replicas", "a global service runs one task per node: replicas must be null.")
    return {"mode": mode, "replicas": None}


def set_mode(spec: Spec, value: dict[str, Any]) -> None:
    spec["Mode"] = {"Replicated": {"Replicas": value["replicas"]}} if value["mode"] == "replicated" \
        else {"Global": {}}


# ---------------------------------------------------------------------------------------------- endpoint mode
ENDPOINT_MODES = ("vip", "dnsrr")


def get_endpoint_mode(spec: Spec) -> dict[str, Any]:
    return {"endpointMode": (spec.get("EndpointSpec") or {}).get("Mode") or ""}


def check_endpoint_mode(value: Any) -> dict[str, Any]:
    """``{"mode": "vip"}`` (the documented body) or ``{"endpointMode": "vip"}`` (what the GET shows)."""
    body = as_object(value, "SVC010", "mode")
    field = "endpointMode" if "endpointMode" in body and "mode" not in body else "mode"
    return {"endpointMode": as_choice(body.get(field), ENDPOINT_MODES, "SVC010", field)}


def set_endpoint_mode(spec: Spec, value: dict[str, Any]) -> None:
    spec.setdefault("EndpointSpec", {})["Mode"] = value["endpointMode"]
