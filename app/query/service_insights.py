"""What a service detail adds to the engine object (docs/read-api.md): ``changes``, the difference between
the service's ``PreviousSpec`` and ``Spec``, and ``integrations``, the swarm tools its labels configure.

Pure functions over the raw engine service dict, returning plain data; ``app.query.representations`` merges
``detail_members`` into the Service detail envelope. They run per detail request rather than on write: one
walk over two specs costs tens of microseconds, only details pay it, and keeping it out of ``Entry`` saves
memory on every cached service.

``changes``: a flat list of ``{field, old, new}`` sorted by path, omitted when there is no PreviousSpec
or nothing differs.

- ``field`` is the path inside ``Spec`` in the engine's own names: struct members joined by dots
  (``TaskTemplate.ContainerSpec.Image``), keys of user maps (``Labels``, ``Env``, ``Sysctls``, ``Options``,
  ``DriverOpts``) always in brackets as JSON strings (``Labels["traefik.enable"]``), so a key containing dots
  can never be read as a path. Any other key that is not an identifier is bracketed the same way.
- ``Env`` is compared as the variables it defines, by name (``TaskTemplate.ContainerSpec.Env["LOG_LEVEL"]``,
  values without the ``NAME=``; an entry without ``=`` has the value null): reordering the list is no change
  and one added variable is one entry. Every other list is one value, compared and shown whole (``Mounts``,
  ``Networks``, ``Args``, ``Constraints``...): their elements have no stable identity, and per-index entries
  would turn one insertion into a cascade.
- ``old`` is omitted when the field was added, ``new`` when it was removed. A dict that appears or disappears
  is expanded into its leaves, so ``old``/``new`` are scalars or lists (a dict only when a field changed type).
- Not changes: a struct member that appears or disappears with a zero value (null, 0, "", false, {}, []),
  since the engine's JSON omits zero values and reads absence as zero; nor one that appears or disappears
  with the default the engine applies anyway (``_ENGINE_DEFAULTS``: stop grace period 10 s, restart policy
  any/5 s, update and rollback config 1/pause/5 s/stop-first), as a client writing back a spec read with
  ``insertDefaults`` would produce. Map entries are always reported, even empty. ``TaskTemplate.ForceUpdate``
  is kept: incrementing it is how an operator forces a redeploy.
- Bounds: at most ``MAX_CHANGES`` (100) entries, the first ones by path; when more differ,
  ``changesOmitted`` says how many were left out. A value whose JSON exceeds ``MAX_VALUE_CHARS`` (1,024)
  characters is cut to that length (a string as itself, anything else as its JSON text) plus "…", and the
  entry carries ``abridged: true``.

``integrations``: one item per tool with at least one label, sorted by name, read from the service labels
(``Spec.Labels``) only: Traefik's swarm provider, swarm-cronjob, Diun's swarm provider and Shepherd all read
the service's (deploy) labels, not the container labels. Each item is ``{name, enabled, ...members, labels}``
where ``labels`` holds the tool's raw labels. ``enabled`` is the tool's enable label (Go ``ParseBool``
syntax; an unparseable value counts as false, as the tools skip such a service) or, when absent, the tool's
default: true for traefik (``exposedByDefault``) and shepherd (it updates every service unless filtered),
false for swarm-cronjob and diun (``watchByDefault``). Other members appear only when their label does;
a boolean or integer that does not parse is null.

- traefik: ``routers`` ``[{name, protocol: http|tcp|udp, rule?, entrypoints[], middlewares[], service?,
  priority?, tls?}]``; ``tls`` is an object as in Traefik's own router configuration, ``{certResolver?,
  options?, domains?: [{main, sans[]}], passthrough? (tcp)}``, present when TLS is on (the ``tls`` label
  is true, or it is absent and some ``tls.*`` option is set) and omitted otherwise; ``domains`` come from
  ``tls.domains[n].main``/``.sans`` (sans split on commas) in index order;
  ``services`` ``[{name, protocol, port?, scheme?}]`` from ``loadbalancer.server.*``, ``middlewares`` (the
  names defined in these labels), ``network`` (``traefik.swarm.network`` or ``traefik.docker.network``).
  Option names are matched case-insensitively, as Traefik does.
- shepherd: ``authConfig``.
- swarm-cronjob: ``schedule``, ``skipRunning``, ``replicas``, ``registryAuth``, ``queryRegistry``.
- diun: ``watchRepo``, ``notifyOn``, ``maxTags``, ``includeTags``, ``excludeTags`` (lists split on ``;``),
  ``sortTags``, ``regopt``, ``hubLink``, ``platform``, ``metadata`` (``diun.metadata.<key>`` by key).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

Data = dict[str, Any]
Path = tuple[str, ...]

MAX_CHANGES = 100
MAX_VALUE_CHARS = 1024
INTEGRATION_NAMES = ("diun", "shepherd", "swarm-cronjob", "traefik")

# Members whose keys are user data (labels, variables, options), not engine struct fields.
_MAP_MEMBERS = frozenset({"Labels", "Env", "Sysctls", "Options", "DriverOpts"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ABSENT: Any = object()
ABSENT: Any = _ABSENT   # marks the missing side of an added or removed member in ``spec_differences``
_SECOND = 1_000_000_000
_ROLLOUT_DEFAULTS = {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5 * _SECOND, "Order": "stop-first"}
_ENGINE_DEFAULTS: dict[Path, Any] = {
    ("TaskTemplate", "ContainerSpec", "StopGracePeriod"): 10 * _SECOND,
    ("TaskTemplate", "ContainerSpec", "Isolation"): "default",
    ("TaskTemplate", "RestartPolicy", "Condition"): "any",
    ("TaskTemplate", "RestartPolicy", "Delay"): 5 * _SECOND,
    ("TaskTemplate", "Runtime"): "container",
    **{(config, member): value for config in ("UpdateConfig", "RollbackConfig")
       for member, value in _ROLLOUT_DEFAULTS.items()},
}


# --------------------------------------------------------------------------- changes
def detail_members(service: Mapping[str, Any]) -> Data:
    """The members a Service detail envelope gains: ``changes`` (bounded, with ``changesOmitted`` when
    cut) and ``integrations``, each left out when empty."""
    members: Data = {}
    changes = spec_changes(service)
    if changes:
        members["changes"] = changes[:MAX_CHANGES]
        if len(changes) > MAX_CHANGES:
            members["changesOmitted"] = len(changes) - MAX_CHANGES
    found = integrations(service)
    if found:
        members["integrations"] = found
    return members


def spec_changes(service: Mapping[str, Any]) -> list[Data]:
    """Every difference between ``PreviousSpec`` and ``Spec``, sorted by path (unbounded in count)."""
    previous, current = service.get("PreviousSpec"), service.get("Spec")
    if not isinstance(previous, Mapping) or not isinstance(current, Mapping):
        return []
    return [change_entry(path, old, new) for path, old, new in spec_differences(previous, current)]


def spec_differences(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple[Path, Any, Any]]:
    """The differences between two specs under the rules above, sorted by path, as ``(path, old, new)``
    with :data:`ABSENT` for an added or removed member. Paths are relative to the spec root, which is
    where the engine-default rules apply; the change history (``app.history``) diffs any two objects
    with it."""
    found: list[tuple[Path, Any, Any]] = []
    _compare((), previous, current, found)
    found.sort(key=lambda change: change[0])
    return found


def _compare(path: Path, old: Any, new: Any, found: list[tuple[Path, Any, Any]]) -> None:
    if old is _ABSENT and isinstance(new, Mapping) and new:
        old = {}  # an added dict is reported leaf by leaf
    if new is _ABSENT and isinstance(old, Mapping) and old:
        new = {}
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in old.keys() | new.keys():
            _compare((*path, key), _member(path, old, key), _member(path, new, key), found)
        return
    if old == new:
        return
    if (old is _ABSENT or new is _ABSENT) and not _is_map_key(path) and _is_implicit(path, old, new):
        return
    found.append((path, old, new))


def _member(path: Path, parent: Mapping[str, Any], key: str) -> Any:
    value = parent.get(key, _ABSENT)
    if value is None and not (path and path[-1] in _MAP_MEMBERS):
        return _ABSENT  # null and absent are the same to the engine
    if key == "Env" and isinstance(value, list) and all(isinstance(item, str) for item in value):
        return _variables(value)
    return value


def _variables(env: list[str]) -> dict[str, str | None]:
    """``NAME=value`` entries by name; the last definition wins, as in the container."""
    variables: dict[str, str | None] = {}
    for item in env:
        name, equals, value = item.partition("=")
        variables[name] = value if equals else None
    return variables


def _is_map_key(path: Path) -> bool:
    return len(path) > 1 and path[-2] in _MAP_MEMBERS


def _is_implicit(path: Path, old: Any, new: Any) -> bool:
    """Whether a member that appeared or disappeared says no more than its absence did."""
    present = new if old is _ABSENT else old
    if isinstance(present, bool | str | list | Mapping) and not present:
        return True  # false, "", [], {}
    if isinstance(present, int | float) and not isinstance(present, bool) and present == 0:
        return True
    return path in _ENGINE_DEFAULTS and _ENGINE_DEFAULTS[path] == present


def change_entry(path: Path, old: Any, new: Any) -> Data:
    """``{field, old?, new?, abridged?}`` for one difference (values cut to ``MAX_VALUE_CHARS``)."""
    entry: Data = {"field": render_path(path)}
    abridged = False
    for member, value in (("old", old), ("new", new)):
        if value is not _ABSENT:
            entry[member], cut = _shown(value)
            abridged = abridged or cut
    if abridged:
        entry["abridged"] = True
    return entry


def render_path(path: Path) -> str:
    """``TaskTemplate.ContainerSpec.Labels["com.docker.stack.namespace"]``: dots between struct members,
    brackets around map keys and around anything that is not an identifier."""
    rendered = ""
    for index, segment in enumerate(path):
        if (index and path[index - 1] in _MAP_MEMBERS) or not _IDENTIFIER.fullmatch(segment):
            rendered += "[" + json.dumps(segment, ensure_ascii=False) + "]"
        else:
            rendered += ("." if rendered else "") + segment
    return rendered


def _shown(value: Any) -> tuple[Any, bool]:
    if value is None or isinstance(value, bool | int | float):
        return value, False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                                           default=str)
    if len(text) <= MAX_VALUE_CHARS:
        return value, False
    return text[:MAX_VALUE_CHARS] + "…", True


# --------------------------------------------------------------------------- integrations
def integrations(service: Mapping[str, Any]) -> list[Data]:
    """The tools configured by the service labels, sorted by name; a tool appears when it has a label."""
    spec = service.get("Spec")
    raw_labels = spec.get("Labels") if isinstance(spec, Mapping) else None
    if not isinstance(raw_labels, Mapping):
        return []
    labels = {key: value for key, value in raw_labels.items() if isinstance(value, str)}
    found: list[Data] = []
    for name, prefix, describe in _TOOLS:
        own = {key: labels[key] for key in sorted(labels) if key.startswith(prefix)}
        if own:
            found.append({"name": name, **describe(own), "labels": own})
    return found


def parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``, which these tools use; None when the text is not a boolean."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _int(text: str) -> int | None:
    stripped = text.strip()
    return int(stripped) if re.fullmatch(r"[+-]?\d+", stripped) else None


def _list(separator: str) -> Callable[[str], list[str]]:
    return lambda text: [part.strip() for part in text.split(separator) if part.strip()]


def _text(text: str) -> str:
    return text


Options = dict[str, tuple[str, Callable[[str], Any]]]
_SHEPHERD: Options = {"auth.config": ("authConfig", _text)}
_CRONJOB: Options = {"schedule": ("schedule", _text), "skip-running": ("skipRunning", parse_bool),
                     "replicas": ("replicas", _int), "registry-auth": ("registryAuth", parse_bool),
                     "query-registry": ("queryRegistry", parse_bool)}
_DIUN: Options = {"watch_repo": ("watchRepo", parse_bool), "notify_on": ("notifyOn", _list(";")),
                  "max_tags": ("maxTags", _int), "include_tags": ("includeTags", _list(";")),
                  "exclude_tags": ("excludeTags", _list(";")), "sort_tags": ("sortTags", _text),
                  "regopt": ("regopt", _text), "hub_link": ("hubLink", _text), "platform": ("platform", _text)}


def _described(labels: Mapping[str, str], prefix: str, enabled_by_default: bool, options: Options) -> Data:
    enable = labels.get(prefix + "enable")
    data: Data = {"enabled": enabled_by_default if enable is None else parse_bool(enable) is True}
    for suffix, (member, parse) in options.items():
        if prefix + suffix in labels:
            data[member] = parse(labels[prefix + suffix])
    return data


def _diun(labels: Mapping[str, str]) -> Data:
    data = _described(labels, "diun.", False, _DIUN)
    metadata = {key.removeprefix("diun.metadata."): value for key, value in labels.items()
                if key.startswith("diun.metadata.")}
    if metadata:
        data["metadata"] = metadata
    return data


_TRAEFIK_PROTOCOLS = ("http", "tcp", "udp")


def _traefik(labels: Mapping[str, str]) -> Data:
    data = _described(labels, "traefik.", True, {})
    data["routers"] = [_router(name, protocol, options)
                       for (name, protocol), options in _traefik_objects(labels, "routers")]
    data["services"] = [_traefik_service(name, protocol, options)
                        for (name, protocol), options in _traefik_objects(labels, "services")]
    data["middlewares"] = sorted({name for (name, _), _ in _traefik_objects(labels, "middlewares")})
    network = labels.get("traefik.swarm.network", labels.get("traefik.docker.network"))
    if network is not None:
        data["network"] = network
    return data


def _traefik_objects(labels: Mapping[str, str], kind: str) -> list[tuple[tuple[str, str], dict[str, str]]]:
    """``traefik.<protocol>.<kind>.<name>.<option>`` grouped by (name, protocol), options lower-cased."""
    objects: dict[tuple[str, str], dict[str, str]] = {}
    for key, value in labels.items():
        parts = key.split(".", 4)
        if len(parts) == 5 and parts[1].lower() in _TRAEFIK_PROTOCOLS and parts[2].lower() == kind:
            objects.setdefault((parts[3], parts[1].lower()), {})[parts[4].lower()] = value
    return sorted(objects.items())


def _router(name: str, protocol: str, options: Mapping[str, str]) -> Data:
    router: Data = {"name": name, "protocol": protocol}
    if "rule" in options:
        router["rule"] = options["rule"]
    router["entrypoints"] = _list(",")(options.get("entrypoints", ""))
    router["middlewares"] = _list(",")(options.get("middlewares", ""))
    if "service" in options:
        router["service"] = options["service"]
    if "priority" in options:
        router["priority"] = _int(options["priority"])
    tls = parse_bool(options.get("tls", ""))
    if tls if tls is not None else any(option.startswith("tls.") for option in options):
        router["tls"] = _router_tls(protocol, options)
    return router


_TLS_DOMAIN = re.compile(r"tls\.domains\[([0-9]{1,6})\]\.(main|sans)")


def _router_tls(protocol: str, options: Mapping[str, str]) -> Data:
    tls: Data = {}
    if "tls.certresolver" in options:
        tls["certResolver"] = options["tls.certresolver"]
    if "tls.options" in options:
        tls["options"] = options["tls.options"]
    domains: dict[int, Data] = {}
    for option, value in options.items():
        match = _TLS_DOMAIN.fullmatch(option)
        if match is not None:
            domain = domains.setdefault(int(match.group(1)), {"main": "", "sans": []})
            domain[match.group(2)] = value if match.group(2) == "main" else _list(",")(value)
    if domains:
        tls["domains"] = [domains[index] for index in sorted(domains)]
    if protocol == "tcp" and "tls.passthrough" in options:
        tls["passthrough"] = parse_bool(options["tls.passthrough"])
    return tls


def _traefik_service(name: str, protocol: str, options: Mapping[str, str]) -> Data:
    service: Data = {"name": name, "protocol": protocol}
    if "loadbalancer.server.port" in options:
        service["port"] = _int(options["loadbalancer.server.port"])
    if "loadbalancer.server.scheme" in options:
        service["scheme"] = options["loadbalancer.server.scheme"]
    return service


_TOOLS: tuple[tuple[str, str, Callable[[Mapping[str, str]], Data]], ...] = (
    ("diun", "diun.", _diun),
    ("shepherd", "shepherd.", lambda labels: _described(labels, "shepherd.", True, _SHEPHERD)),
    ("swarm-cronjob", "swarm.cronjob.", lambda labels: _described(labels, "swarm.cronjob.", False, _CRONJOB)),
    ("traefik", "traefik.", _traefik),
)
