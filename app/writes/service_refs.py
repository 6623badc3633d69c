"""Sub-resources that refer to other objects: ``configs``, ``secrets`` and ``networks`` of a service.

A reference is resolved (by id or by name) against what the caller knows of the cluster, through the small
:class:`References` seam (the cache in the HTTP views, a fake in unit tests), before the engine is called:
an unknown config is ``SVC015``, an unknown secret ``SVC016``, an unknown network ``SVC017``, each naming
the field. The values shown and accepted are the documented ones (``{configID, configName, fileName}``...); the
setters build the engine's shapes (file targets owned by root, mode 0444) and keep what a client cannot see
(file owner and mode, driver options) for the entries it left unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from app.cache.store import Cache
from app.resources import ResourceKind
from app.writes.service_checks import as_list, as_object, as_str, as_strings, invalid, only_keys, without_nulls
from app.writes.service_values import Spec, container, container_for_write, put_or_drop, template, template_for_write

FILE_MODE = 0o444


class Found(NamedTuple):
    id: str
    name: str
    raw: dict[str, Any]


class References(Protocol):
    def find(self, kind: ResourceKind, ref: str) -> Found | None:
        """The config, secret or network whose id or name is ``ref``; None when there is none."""


class CacheReferences:
    """References resolved in the cache: by id first, then by name (configs, secrets, networks are few)."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache

    def find(self, kind: ResourceKind, ref: str) -> Found | None:
        entry = self._cache.get(kind, ref)
        if entry is None:
            entry = next((e for e in self._cache.entries(kind) if e.name == ref), None)
        return None if entry is None else Found(entry.id, entry.name or entry.id, entry.raw)


# ---------------------------------------------------------------------------------------------- configs, secrets
class _FileRefs(NamedTuple):
    kind: ResourceKind
    code: str
    field: str          # configs / secrets
    member: str         # ContainerSpec member: Configs / Secrets
    id_key: str         # configID / secretID
    name_key: str       # configName / secretName
    engine_id: str      # ConfigID / SecretID
    engine_name: str    # ConfigName / SecretName
    default_dir: str    # where fileName defaults to (docs/writes-services.md)


CONFIGS = _FileRefs(ResourceKind.CONFIG, "SVC015", "configs", "Configs", "configID", "configName", "ConfigID",
                    "ConfigName", "/")
SECRETS = _FileRefs(ResourceKind.SECRET, "SVC016", "secrets", "Secrets", "secretID", "secretName", "SecretID",
                    "SecretName", "/run/secrets/")


def file_refs_getter(refs: _FileRefs) -> Callable[[Spec], list[dict[str, Any]]]:
    def get(spec: Spec) -> list[dict[str, Any]]:
        return [{refs.id_key: item.get(refs.engine_id), refs.name_key: item.get(refs.engine_name),
                 "fileName": (item.get("File") or {}).get("Name")}
                for item in container(spec).get(refs.member) or [] if "File" in item]
    return get


def file_refs_checker(refs: _FileRefs) -> Callable[[Any, References], list[dict[str, Any]]]:
    def check(value: Any, known: References) -> list[dict[str, Any]]:
        checked: list[dict[str, Any]] = []
        files: set[str] = set()
        for index, item in enumerate(as_list(value, refs.code, refs.field)):
            where = f"{refs.field}[{index}]"
            body = without_nulls(as_object(item, refs.code, where))
            only_keys(body, (refs.id_key, refs.name_key, "fileName"), refs.code, where)
            found = _resolve(refs, body, known, where)
            file_name = as_str(body.get("fileName", refs.default_dir + found.name), refs.code, f"{where}.fileName",
                               nonempty=True)
            if file_name in files:
                raise invalid(refs.code, f"{where}.fileName", f"{file_name} is used twice.")
            files.add(file_name)
            checked.append({refs.id_key: found.id, refs.name_key: found.name, "fileName": file_name})
        return checked
    return check


def _resolve(refs: _FileRefs, body: dict[str, Any], known: References, where: str) -> Found:
    by_id = body.get(refs.id_key)
    by_name = body.get(refs.name_key)
    if by_id is None and by_name is None:
        raise invalid(refs.code, where, f"needs {refs.id_key} or {refs.name_key}.")
    found: Found | None = None
    for key, ref in ((refs.id_key, by_id), (refs.name_key, by_name)):
        if ref is None:
            continue
        match = known.find(refs.kind, as_str(ref, refs.code, f"{where}.{key}", nonempty=True))
        if match is None:
            raise invalid(refs.code, f"{where}.{key}", f"no {refs.kind.value} {ref!r}.")
        if found is not None and match.id != found.id:
            raise invalid(refs.code, f"{where}.{key}", f"{ref!r} is not the {refs.kind.value} {by_id!r}.")
        found = match
    assert found is not None
    return found


def file_refs_setter(refs: _FileRefs) -> Callable[[Spec, list[dict[str, Any]]], None]:
    def set_refs(spec: Spec, value: list[dict[str, Any]]) -> None:
        holder = container_for_write(spec)
        existing = holder.get(refs.member) or []
        files = {(item.get(refs.engine_id), item["File"].get("Name")): item["File"]
                 for item in existing if item.get("File")}
        runtime_refs = [item for item in existing if "File" not in item]   # credential specs: not ours to drop
        written = [{"File": files.get((item[refs.id_key], item["fileName"]))
                    or {"Name": item["fileName"], "UID": "0", "GID": "0", "Mode": FILE_MODE},
                    refs.engine_id: item[refs.id_key], refs.engine_name: item[refs.name_key]} for item in value]
        put_or_drop(holder, refs.member, written + runtime_refs)
    return set_refs


# ---------------------------------------------------------------------------------------------- networks
def get_networks(spec: Spec) -> list[dict[str, Any]]:
    attached = template(spec).get("Networks") or spec.get("Networks") or []
    return [{"target": item.get("Target"), **({"aliases": list(item["Aliases"])} if item.get("Aliases") else {})}
            for item in attached]


def check_networks(value: Any, known: References) -> list[dict[str, Any]]:
    code = "SVC017"
    checked: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(as_list(value, code, "networks")):
        where = f"networks[{index}]"
        body = without_nulls(as_object(item, code, where))
        only_keys(body, ("target", "aliases"), code, where)
        if "target" not in body:
            raise invalid(code, f"{where}.target", "is required (a network id or name).")
        target = as_str(body["target"], code, f"{where}.target", nonempty=True)
        found = known.find(ResourceKind.NETWORK, target)
        if found is None:
            raise invalid(code, f"{where}.target", f"no network {target!r}.")
        if found.raw.get("Ingress"):
            raise invalid(code, f"{where}.target", "the ingress network is attached through published ports.")
        if found.raw.get("Scope") not in (None, "swarm"):
            raise invalid(code, f"{where}.target", f"{found.name} is a {found.raw.get('Scope')}-scoped network; "
                                                   "services attach to swarm-scoped ones.")
        if found.id in seen:
            raise invalid(code, f"{where}.target", f"{found.name} is attached twice.")
        seen.add(found.id)
        attachment: dict[str, Any] = {"target": found.id}
        aliases = as_strings(body.get("aliases", []), code, f"{where}.aliases")
        if aliases:
            attachment["aliases"] = aliases
        checked.append(attachment)
    return checked


def set_networks(spec: Spec, value: list[dict[str, Any]]) -> None:
    """Written to ``TaskTemplate.Networks``; the deprecated ``Spec.Networks`` is dropped (one place only)."""
    previous = {item.get("Target"): item for item in template(spec).get("Networks") or spec.get("Networks") or []}
    attached = []
    for item in value:
        attachment: dict[str, Any] = {"Target": item["target"]}
        if item.get("aliases"):
            attachment["Aliases"] = item["aliases"]
        options = (previous.get(item["target"]) or {}).get("DriverOpts")
        if options:
            attachment["DriverOpts"] = options
        attached.append(attachment)
    spec.pop("Networks", None)
    put_or_drop(template_for_write(spec), "Networks", attached)
