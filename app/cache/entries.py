"""One cached object: the engine's raw JSON plus the values derived from it once, on write.

Reads happen far more often than writes (every list request walks every entry of a kind), so the name,
the filter activation, the sort keys and the search segments are computed here, when the watcher stores
an object, and never per request.
"""

from __future__ import annotations

import json
import marshal
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.resources import STACK_LABEL, ResourceKind

Raw = dict[str, Any]
Activation = dict[str, str | int]
SortKey = tuple[Any, ...]

_SEGMENT_SPLIT = re.compile(r"[-_.]+")
_CONTROL = re.compile(r"[\x00-\x1f]")


@dataclass(slots=True)
class Entry:
    kind: ResourceKind
    id: str                    # the path identifier: engine ID, or the name for stacks and volumes
    name: str                  # display name (node: hostname)
    raw: Raw                   # engine object as the engine returned it (secrets without Spec.Data)
    activation: Activation     # filter fields, every one present
    sort_keys: dict[str, SortKey]
    search_name: str           # lower-cased name
    search_segments: tuple[str, ...]
    updated: str               # timestamp text for Last-Modified ("" when the kind has none)
    version: int | None        # engine Version.Index, when the kind has one
    size: int = 0              # estimated bytes of memory ``raw`` holds (history byte bound)
    written: int = 0           # the cache's logical time of the write that stored it (0: not stored yet)
    search_text: str = ""      # lower-cased fields /search matches (``search_text``), delimited for its scans


def dig(raw: Mapping[str, Any], *path: str) -> Any:
    """``raw[path[0]][path[1]]...``, or None where a step is missing or not a mapping (engine JSON omits
    empties). The exact ``dict`` test first: decoded JSON is plain dicts, and the ABC check costs ~0.5 µs."""
    value: Any = raw
    for key in path:
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ci(value: str) -> SortKey:
    """Case-insensitive key that still orders deterministically among equal folds."""
    return (value.lower(), value)


def service_mode(raw: Mapping[str, Any]) -> str:
    mode = dig(raw, "Spec", "Mode") or {}
    for key, name in (("Replicated", "replicated"), ("Global", "global"),
                      ("ReplicatedJob", "replicated-job"), ("GlobalJob", "global-job")):
        if key in mode:
            return name
    return ""


# Task state order (docs/read-api.md): running first, then new/preparing/starting/ready (in that order),
# then the rest alphabetically (pending, assigned and accepted included: only these four are ranked).
_TASK_STATE_RANK = {"running": 0, "new": 1, "preparing": 2, "starting": 3, "ready": 4}


def _task_state_key(state: str) -> SortKey:
    return (_TASK_STATE_RANK.get(state, 5), state)


Derived = tuple[str, str, Activation, dict[str, SortKey], str]  # id, name, activation, sort keys, updated


def _node(raw: Raw) -> Derived:
    node_id, hostname = _text(raw.get("ID")), _text(dig(raw, "Description", "Hostname"))
    state, role = _text(dig(raw, "Status", "State")), _text(dig(raw, "Spec", "Role"))
    availability = _text(dig(raw, "Spec", "Availability"))
    activation: Activation = {"id": node_id, "name": hostname, "state": state, "role": role,
                              "availability": availability}
    keys = {"hostname": _ci(hostname), "role": (role,), "status": (state,), "availability": (availability,)}
    return node_id, hostname, activation, keys, _text(raw.get("UpdatedAt"))


def _service(raw: Raw) -> Derived:
    service_id, name = _text(raw.get("ID")), _text(dig(raw, "Spec", "Name"))
    mode = service_mode(raw)
    activation: Activation = {
        "id": service_id, "name": name,
        "image": _text(dig(raw, "Spec", "TaskTemplate", "ContainerSpec", "Image")),
        "mode": mode, "stack": _text((dig(raw, "Spec", "Labels") or {}).get(STACK_LABEL)),
    }
    return service_id, name, activation, {"name": _ci(name), "mode": (mode,)}, _text(raw.get("UpdatedAt"))


def _task(raw: Raw) -> Derived:
    task_id, state = _text(raw.get("ID")), _text(dig(raw, "Status", "State"))
    service_id, node_id, slot = _text(raw.get("ServiceID")), _text(raw.get("NodeID")), _int(raw.get("Slot"))
    activation: Activation = {
        "id": task_id, "state": state, "desired_state": _text(raw.get("DesiredState")),
        "image": _text(dig(raw, "Spec", "ContainerSpec", "Image")),
        "exit_code": _int(dig(raw, "Status", "ContainerStatus", "ExitCode")),
        "error": _text(dig(raw, "Status", "Err")),
        "service": service_id, "node": node_id, "slot": slot,
    }
    keys = {"state": _task_state_key(state), "service": (service_id,), "node": (node_id,)}
    # A task's display name needs its service's name; the query layer enriches it at read time.
    return task_id, task_id, activation, keys, _text(raw.get("UpdatedAt"))


def _config_like(raw: Raw) -> Derived:
    object_id, name = _text(raw.get("ID")), _text(dig(raw, "Spec", "Name"))
    created, updated = _text(raw.get("CreatedAt")), _text(raw.get("UpdatedAt"))
    keys = {"name": _ci(name), "created": (created,), "updated": (updated,)}
    return object_id, name, {"id": object_id, "name": name}, keys, updated


def _network(raw: Raw) -> Derived:
    network_id, name = _text(raw.get("Id") or raw.get("ID")), _text(raw.get("Name"))
    driver, scope = _text(raw.get("Driver")), _text(raw.get("Scope"))
    activation: Activation = {"id": network_id, "name": name, "driver": driver, "scope": scope}
    keys = {"name": _ci(name), "driver": (driver,), "scope": (scope,)}
    return network_id, name, activation, keys, _text(raw.get("Created"))


def _volume(raw: Raw) -> Derived:
    name, driver, scope = _text(raw.get("Name")), _text(raw.get("Driver")), _text(raw.get("Scope"))
    keys = {"name": _ci(name), "driver": (driver,), "scope": (scope,)}
    return name, name, {"name": name, "driver": driver, "scope": scope}, keys, _text(raw.get("CreatedAt"))


def _stack(raw: Raw) -> Derived:
    name = _text(raw.get("name"))
    activation: Activation = {"name": name}
    for member in ("services", "configs", "secrets", "networks", "volumes"):
        activation[member] = len(raw.get(member) or ())
    return name, name, activation, {"name": _ci(name)}, ""


_DERIVE: dict[ResourceKind, Callable[[Raw], Derived]] = {
    ResourceKind.NODE: _node, ResourceKind.SERVICE: _service, ResourceKind.TASK: _task,
    ResourceKind.CONFIG: _config_like, ResourceKind.SECRET: _config_like,
    ResourceKind.NETWORK: _network, ResourceKind.VOLUME: _volume, ResourceKind.STACK: _stack,
}


def redact(kind: ResourceKind, raw: Raw) -> Raw:
    """Drop secret payloads before anything is stored, so no later path can leak them."""
    if kind is ResourceKind.SECRET and isinstance(raw.get("Spec"), dict) and "Data" in raw["Spec"]:
        raw = {**raw, "Spec": {k: v for k, v in raw["Spec"].items() if k != "Data"}}
    return raw


# Python holds decoded engine JSON in 4.5-5.4 times its encoded size (measured with tracemalloc on the
# synthetic cluster's tasks, services and nodes); 5 keeps the estimate on the safe side.
MEMORY_PER_ENCODED_BYTE = 5


def estimate_size(raw: Raw) -> int:
    """Bytes of memory a decoded engine object holds, estimated from its ``marshal`` encoding (about 6 µs
    for a 1 KB task, half the cost of ``json.dumps``); computed once per built entry, never per poll."""
    try:
        encoded = len(marshal.dumps(raw))
    except ValueError:  # a type marshal does not know (never in engine JSON): fall back to JSON text
        encoded = len(json.dumps(raw, default=str))
    return encoded * MEMORY_PER_ENCODED_BYTE


def build_entry(kind: ResourceKind, raw: Raw) -> Entry:
    raw = redact(kind, raw)
    entry_id, name, activation, sort_keys, updated = _DERIVE[kind](raw)
    lowered = name.lower()
    version = dig(raw, "Version", "Index")
    return Entry(kind, entry_id, name, raw, activation, sort_keys, lowered,
                 tuple(s for s in _SEGMENT_SPLIT.split(lowered) if s), updated,
                 version if isinstance(version, int) else None, estimate_size(raw),
                 search_text=search_text(kind, raw, entry_id, name))


# /search (``app.query.search``) scans one string per kind made of these texts, so the fields are
# delimited once here: NAME_MARK opens an object's text and precedes its name, FIELD_MARK ends every
# field. "\x1eq\x1f" is then an exact name, "\x1fq\x1f" an exact other field, "\x1eq"/"\x1fq" prefixes.
NAME_MARK, FIELD_MARK = "\x1e", "\x1f"
_FIELD_CHARS = 256      # a longer field (a label holding a document) is cut: search is for names and tags


def image_reference(image: str) -> str:
    """The image without its ``@sha256:`` digest: what people type and what /search shows."""
    return image.split("@", 1)[0]


def _label_fields(labels: Any) -> list[str]:
    if not isinstance(labels, Mapping):
        return []
    fields: list[str] = []
    for key, value in labels.items():
        fields.append(f"{key}={value}" if value else str(key))
        if value:
            fields.append(str(value))
    return fields


def search_text(kind: ResourceKind, raw: Raw, entry_id: str, name: str) -> str:
    """What /search matches per kind (docs/search-and-recommendations.md): services on name, id, image and labels;
    tasks on id, image and container labels (their service's name is matched through the service); nodes
    on hostname, id, address and labels; stacks on name; the other kinds on name, id and labels. Labels
    count as ``key=value`` and as ``value``."""
    fields = [] if kind.spec.id_is_name else [entry_id]
    if kind is ResourceKind.SERVICE:
        fields.append(image_reference(_text(dig(raw, "Spec", "TaskTemplate", "ContainerSpec", "Image"))))
        fields += _label_fields(dig(raw, "Spec", "Labels"))
    elif kind is ResourceKind.TASK:
        name = ""
        fields.append(image_reference(_text(dig(raw, "Spec", "ContainerSpec", "Image"))))
        fields += _label_fields(dig(raw, "Spec", "ContainerSpec", "Labels"))
    elif kind is ResourceKind.NODE:
        fields.append(_text(dig(raw, "Status", "Addr")))
        fields += _label_fields(dig(raw, "Spec", "Labels"))
    elif kind is not ResourceKind.STACK:
        fields += _label_fields(dig(raw, "Spec", "Labels") if kind in (ResourceKind.CONFIG, ResourceKind.SECRET)
                                else raw.get("Labels"))
    parts = [name[:_FIELD_CHARS], *(field[:_FIELD_CHARS] for field in fields if field)]
    if _CONTROL.search("".join(parts)):  # a control character would fake a delimiter (never in practice)
        parts = [_CONTROL.sub(" ", part) for part in parts]
    return NAME_MARK + FIELD_MARK.join(parts).lower() + FIELD_MARK


def raw_identity(kind: ResourceKind, raw: Raw) -> tuple[str, int | None]:
    """(path id, Version.Index) of a raw object without deriving the rest: lets a resync skip
    rebuilding entries the engine reports unchanged."""
    # Runs for every object of every listing (10,000 tasks per poll): plain dict lookups, no ABC checks.
    if kind is ResourceKind.VOLUME:
        object_id = raw.get("Name")
    elif kind is ResourceKind.NETWORK:
        object_id = raw.get("Id") or raw.get("ID")
    else:
        object_id = raw.get("ID")
    version = raw.get("Version")
    index = version.get("Index") if isinstance(version, dict) else None
    return object_id if isinstance(object_id, str) else "", index if type(index) is int else None


def labels_of(entry: Entry) -> Mapping[str, Any]:
    """Object labels: Spec.Labels for swarm objects, Labels for networks and volumes."""
    labels = dig(entry.raw, "Spec", "Labels")
    if labels is None:
        labels = entry.raw.get("Labels")
    return labels if isinstance(labels, Mapping) else {}


def stack_of(entry: Entry) -> str:
    return _text(labels_of(entry).get(STACK_LABEL))


def service_references(entry: Entry) -> dict[ResourceKind, set[str]]:
    """Configs, secrets, networks (by id) and volumes (by name) a service spec uses."""
    template = dig(entry.raw, "Spec", "TaskTemplate") or {}
    container = template.get("ContainerSpec") or {}
    networks = [*(template.get("Networks") or ()), *(dig(entry.raw, "Spec", "Networks") or ())]
    return {
        ResourceKind.CONFIG: {_text(c.get("ConfigID")) for c in container.get("Configs") or ()} - {""},
        ResourceKind.SECRET: {_text(s.get("SecretID")) for s in container.get("Secrets") or ()} - {""},
        ResourceKind.NETWORK: {_text(n.get("Target")) for n in networks} - {""},
        ResourceKind.VOLUME: {_text(m.get("Source")) for m in container.get("Mounts") or ()
                              if m.get("Type") == "volume"} - {""},
    }


def is_same(old: Entry, new: Entry) -> bool:
    """Cheap equality: swarm objects bump Version.Index on every change, others compare the JSON."""
    if old.version is not None and old.version == new.version:
        return True
    return old.raw == new.raw


def matches_search(entry: Entry, query: str) -> bool:
    """Substring of the name, or the query split over consecutive segment prefixes (``wa`` → ``web_api``)."""
    if query in entry.search_name:
        return True
    return _segment_prefix_match(query, entry.search_segments)


def _segment_prefix_match(query: str, segments: tuple[str, ...]) -> bool:
    def match_from(position: int, segment_index: int) -> bool:
        if position == len(query):
            return True
        if segment_index >= len(segments):
            return False
        segment = segments[segment_index]
        length = 1
        while length <= len(segment) and position + length <= len(query):
            if query[position:position + length] != segment[:length]:
                break
            if match_from(position + length, segment_index + 1):
                return True
            length += 1
        return False

    return any(match_from(0, start) for start in range(len(segments)))
