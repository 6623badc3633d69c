"""Embedded references a restricted reader may not follow, redacted from service and task objects.

A readable service or task's engine JSON names other objects: the configs, secrets, volumes and networks
its container spec uses, and (tasks) a full copy of every network it is attached to. The read paths pass
that JSON through, so without this step a reader of stack ``ops`` would read the name and stack label of
the ``demo_frontend`` network its tasks join. Rules (nothing a user may not read appears in what it reads; docs/acl.md):

- ``ContainerSpec.Configs[]`` / ``Secrets[]`` of an unreadable config/secret: ``ConfigName`` /
  ``SecretName`` → null, and ``File.Name`` → null when it contains that name (a secret's default target
  is its name);
- ``ContainerSpec.Mounts[]`` of type ``volume`` on an unreadable volume: ``Source`` → null, ``Target`` →
  null when it contains the volume's name, and the volume's ``VolumeOptions.Labels`` dropped (an
  uncached volume, e.g. node-local, is judged by ``volume:<name>`` and the stack label in those options);
- ``Networks[]`` (``Spec.TaskTemplate``, ``Spec``, a task's ``Spec``): ``Target`` is an id and stays; a
  target given by name of an unreadable cached network becomes its id; ``Aliases`` (the service's own
  DNS names) stay;
- a task's ``NetworksAttachments[].Network`` of an unreadable network: only ``{"ID"}`` is kept (name,
  labels, driver and IPAM dropped); ``Addresses`` (the task's own) stay;
- ``Endpoint.VirtualIPs[].NetworkID``, ``ServiceID``, ``NodeID``, ``SecretID``/``ConfigID``: ids, kept.

A referenced id the cache does not know is left as is (an id reveals nothing). Services are redacted in
``Spec`` and ``PreviousSpec``. The result is copy-on-write: the object itself when nothing is hidden, else
a copy sharing every untouched part (cache objects are never mutated). Unrestricted access never comes
here (``visible is None``). Results are memoised per (grants, object) until the cache changes, so a list
page polled by the same reader costs a dict hit per item.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

from app.acl.memo import PerCache
from app.cache.entries import Entry, build_entry
from app.cache.store import Cache
from app.resources import STACK_LABEL, ResourceKind

Raw = dict[str, Any]
Visible = Callable[[Entry], bool]
Hidden = frozenset[tuple[str, str]]       # (kind, id or volume name) of each hidden reference
MEMO_SIZE = 20_000        # objects per grants
MEMO_GRANTS = 64         # grant sets
_KINDS = (ResourceKind.SERVICE, ResourceKind.TASK)
_REFS = (("Configs", "ConfigID", "ConfigName", ResourceKind.CONFIG),
         ("Secrets", "SecretID", "SecretName", ResourceKind.SECRET))


class _Judge:
    """One redaction: which referenced objects ``visible`` hides (each asked once)."""

    __slots__ = ("_by_name", "_seen", "cache", "hidden", "visible")

    def __init__(self, cache: Cache, visible: Visible) -> None:
        self.cache, self.visible = cache, visible
        self.hidden: set[tuple[str, str]] = set()
        self._seen: dict[tuple[ResourceKind, str], bool] = {}
        self._by_name: dict[str, Entry] | None = None

    def hides(self, kind: ResourceKind, object_id: Any, labels: Any = None) -> bool:
        if not isinstance(object_id, str) or not object_id:
            return False
        key = (kind, object_id)
        known = self._seen.get(key)
        if known is None:
            entry = self.cache.get(kind, object_id)
            if entry is None and kind is ResourceKind.VOLUME:   # node-local: judged by name and stack label
                stack = labels.get(STACK_LABEL) if isinstance(labels, dict) else None
                entry = build_entry(kind, {"Name": object_id, "Labels": {STACK_LABEL: stack} if stack else {}})
            known = self._seen[key] = entry is not None and not self.visible(entry)
            if known:
                self.hidden.add((kind.value, object_id))
        return known

    def network_named(self, target: str) -> Entry | None:
        if self._by_name is None:
            self._by_name = {e.name: e for e in self.cache.entries(ResourceKind.NETWORK)}
        return self._by_name.get(target)


def _set(data: Raw, key: str, value: Any) -> Raw:
    """``data`` with ``key`` set to ``value``: ``data`` itself when unchanged, else a shallow copy."""
    if data.get(key) is value:
        return data
    copied = dict(data)
    copied[key] = value
    return copied


def _each(items: Any, one: Callable[[Raw], Raw]) -> Any:
    """``items`` with ``one`` applied to each dict: the same list when no item changed."""
    if not isinstance(items, list):
        return items
    changed = [one(item) if isinstance(item, dict) else item for item in items]
    return items if all(new is old for new, old in zip(changed, items, strict=True)) else changed


def _naming(value: Any, name: Any) -> bool:
    """Does ``value`` (a path the service chose) spell the hidden object's ``name``?"""
    return isinstance(value, str) and isinstance(name, str) and bool(name) and name in value


def _file_ref(judge: _Judge, id_key: str, name_key: str, kind: ResourceKind, ref: Raw) -> Raw:
    if not judge.hides(kind, ref.get(id_key)):
        return ref
    name = ref.get(name_key)
    out = dict(ref)
    out[name_key] = None
    file = ref.get("File")
    if isinstance(file, dict) and _naming(file.get("Name"), name):
        out["File"] = {**file, "Name": None}
    return out


def _mount(judge: _Judge, mount: Raw) -> Raw:
    options = mount.get("VolumeOptions")
    labels = options.get("Labels") if isinstance(options, dict) else None
    source = mount.get("Source")
    if mount.get("Type") != "volume" or not judge.hides(ResourceKind.VOLUME, source, labels):
        return mount
    out = dict(mount)
    out["Source"] = None
    if _naming(mount.get("Target"), source):
        out["Target"] = None
    if isinstance(options, dict) and "Labels" in options:
        out["VolumeOptions"] = {k: v for k, v in options.items() if k != "Labels"}
    return out


def _container(judge: _Judge, container: Raw) -> Raw:
    out = container
    for member, id_key, name_key, kind in _REFS:
        out = _set(out, member, _each(container.get(member), partial(_file_ref, judge, id_key, name_key, kind)))
    return _set(out, "Mounts", _each(container.get("Mounts"), lambda mount: _mount(judge, mount)))


def _network_ref(judge: _Judge, ref: Raw) -> Raw:
    target = ref.get("Target")
    if not isinstance(target, str) or judge.cache.get(ResourceKind.NETWORK, target) is not None:
        return ref      # an id (readable or not): reveals nothing
    named = judge.network_named(target)
    if named is None or not judge.hides(ResourceKind.NETWORK, named.id):
        return ref
    return _set(ref, "Target", named.id)


def _task_spec(judge: _Judge, spec: Any) -> Any:
    """A ``TaskSpec`` (a service's ``TaskTemplate``, a task's ``Spec``)."""
    if not isinstance(spec, dict):
        return spec
    container = spec.get("ContainerSpec")
    out = _set(spec, "ContainerSpec", _container(judge, container)) if isinstance(container, dict) else spec
    return _set(out, "Networks", _each(spec.get("Networks"), lambda ref: _network_ref(judge, ref)))


def _service_spec(judge: _Judge, spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = _set(spec, "TaskTemplate", _task_spec(judge, spec.get("TaskTemplate"))) if "TaskTemplate" in spec \
        else spec
    if "Networks" in spec:
        out = _set(out, "Networks", _each(spec["Networks"], lambda ref: _network_ref(judge, ref)))
    return out


def _attachment(judge: _Judge, attachment: Raw) -> Raw:
    network = attachment.get("Network")
    if not isinstance(network, dict):
        return attachment
    network_id = network.get("ID")
    if not judge.hides(ResourceKind.NETWORK, network_id):
        return attachment
    return _set(attachment, "Network", {"ID": network_id})


def _redacted(kind: ResourceKind, raw: Raw, judge: _Judge) -> Raw:
    out = raw
    if kind is ResourceKind.SERVICE:
        for member in ("Spec", "PreviousSpec"):
            if member in raw:
                out = _set(out, member, _service_spec(judge, raw[member]))
    elif kind is ResourceKind.TASK:
        if "Spec" in raw:
            out = _set(out, "Spec", _task_spec(judge, raw["Spec"]))
        if "NetworksAttachments" in raw:
            out = _set(out, "NetworksAttachments",
                       _each(raw["NetworksAttachments"], lambda attachment: _attachment(judge, attachment)))
    return out


def redact_raw(kind: ResourceKind, raw: Raw, cache: Cache, visible: Visible) -> tuple[Raw, Hidden]:
    """``raw`` without the names of what ``visible`` hides, and the hidden references (uncached)."""
    if kind not in _KINDS or not isinstance(raw, dict):
        return raw, frozenset()
    judge = _Judge(cache, visible)
    out = _redacted(kind, raw, judge)
    return out, frozenset(judge.hidden)


def hidden_references(kind: ResourceKind, raw: Raw, cache: Cache, visible: Visible) -> Hidden:
    """What a reader's copy of ``raw`` leaves out (streams key their shared variants by it)."""
    return redact_raw(kind, raw, cache, visible)[1]


# ---------------------------------------------------------------------------------------------- memo
class _Memo:
    """Redacted objects per (grants, object), kept until the cache changes (a referenced network moving
    to another stack changes what is hidden; an object's new version is a new raw dict). One bucket per
    grants; the request's own predicate finds its bucket without hashing the grants again per item."""

    def __init__(self, cache: Cache, size: int = MEMO_SIZE) -> None:
        self.size = size
        self.buckets: dict[Hashable, dict[int, tuple[Raw, Raw]]] = {}
        self._last: tuple[Visible, dict[int, tuple[Raw, Raw]]] | None = None   # holds the predicate alive
        self.hits = self.misses = 0
        cache.subscribe(self._changed)

    def _changed(self, changes: list[Any]) -> None:
        if changes:
            self.clear()

    def clear(self) -> None:
        self.buckets.clear()
        self._last = None

    def bucket(self, visible: Visible, key: Hashable) -> dict[int, tuple[Raw, Raw]]:
        last = self._last
        if last is not None and last[0] is visible:
            return last[1]
        found = self.buckets.get(key)
        if found is None:
            if len(self.buckets) >= MEMO_GRANTS:
                self.buckets.clear()
            found = self.buckets[key] = {}
        self._last = (visible, found)
        return found


memo_for: PerCache[_Memo] = PerCache(_Memo)


def redact(entry: Entry, cache: Cache, visible: Visible) -> Raw:
    """``entry.raw`` as a reader limited by ``visible`` may see it (``entry.raw`` itself when nothing is
    hidden). Memoised when ``visible`` has a ``memo_key`` (same key ⇒ same decisions, e.g. the request's
    ``ReadFilter``); the result is shared: callers must not mutate it."""
    raw = entry.raw
    if entry.kind not in _KINDS or not isinstance(raw, dict):
        return raw
    key = getattr(visible, "memo_key", None)
    if key is None:
        return _redacted(entry.kind, raw, _Judge(cache, visible))
    memo = memo_for(cache)
    bucket = memo.bucket(visible, key)
    found = bucket.get(id(raw))
    if found is not None and found[0] is raw:
        memo.hits += 1
        return found[1]
    memo.misses += 1
    out = _redacted(entry.kind, raw, _Judge(cache, visible))
    if len(bucket) >= memo.size:
        bucket.clear()
    bucket[id(raw)] = (raw, out)
    return out
