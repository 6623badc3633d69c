"""The in-memory cluster state: one dict of entries per kind, the indexes over them, derived stacks,
freshness, and the change records every mutation produces.

Only the watcher writes here; blueprints only read. No method does I/O, so under gevent each mutation
completes before any reader runs. A full sync builds the new state aside and swaps it in at once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from app.cache.entries import Entry, Raw, build_entry, is_same, raw_identity, service_references, stack_of
from app.cache.history import Action, Change, History
from app.resources import ENGINE_KINDS, ResourceKind

Listener = Callable[[list[Change]], None]
_STACK_MEMBER_KINDS = (ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET,
                       ResourceKind.NETWORK, ResourceKind.VOLUME)
_REF_KINDS = (ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME)


@dataclass(frozen=True, slots=True)
class Freshness:
    """What a reader needs to know to not mistake stale state for current."""

    synced: bool                 # the first full sync has completed
    connected: bool              # the engine connection is live right now
    last_contact: float | None   # wall-clock time of the last successful engine contact
    last_sync: float | None      # wall-clock time of the last completed full sync
    last_sync_duration: float | None
    seq: int                     # sequence number of the latest change


class Cache:
    def __init__(self, history_capacity: int = 10_000) -> None:
        self._entries: dict[ResourceKind, dict[str, Entry]] = {kind: {} for kind in ResourceKind}
        self._lists: dict[ResourceKind, list[Entry] | None] = dict.fromkeys(ResourceKind)
        self._sorted: dict[tuple[ResourceKind, str], list[Entry]] = {}
        self._tasks_by_service: dict[str, set[str]] = defaultdict(set)
        self._tasks_by_node: dict[str, set[str]] = defaultdict(set)
        self._refs: dict[ResourceKind, dict[str, set[str]]] = {k: defaultdict(set) for k in _REF_KINDS}
        self._stack_members: dict[str, dict[ResourceKind, set[str]]] = {}
        self._touched_stacks: set[str] = set()
        self.history = History(history_capacity)
        self._listeners: list[Listener] = []
        self._synced = False
        self._connected = False
        self._last_contact: float | None = None
        self._last_sync: float | None = None
        self._last_sync_duration: float | None = None

    # ------------------------------------------------------------------ reads
    def get(self, kind: ResourceKind, object_id: str) -> Entry | None:
        return self._entries[kind].get(object_id)

    def entries(self, kind: ResourceKind) -> list[Entry]:
        """All entries of a kind in a stable order; the list is shared, callers must not mutate it."""
        cached = self._lists[kind]
        if cached is None:
            cached = self._lists[kind] = list(self._entries[kind].values())
        return cached

    def sorted_entries(self, kind: ResourceKind, field: str) -> list[Entry]:
        """Entries ordered by a sort field, ascending; memoised until the kind changes."""
        key = (kind, field)
        cached = self._sorted.get(key)
        if cached is None:
            cached = self._sorted[key] = sorted(self.entries(kind), key=lambda e: e.sort_keys[field])
        return cached

    def count(self, kind: ResourceKind) -> int:
        return len(self._entries[kind])

    def tasks_of_service(self, service_id: str) -> list[Entry]:
        return self._resolve(ResourceKind.TASK, self._tasks_by_service.get(service_id, ()))

    def tasks_of_node(self, node_id: str) -> list[Entry]:
        return self._resolve(ResourceKind.TASK, self._tasks_by_node.get(node_id, ()))

    def services_using(self, kind: ResourceKind, object_id: str) -> list[Entry]:
        return self._resolve(ResourceKind.SERVICE, self._refs[kind].get(object_id, ()))

    def stack_members(self, name: str, kind: ResourceKind) -> list[Entry]:
        return self._resolve(kind, self._stack_members.get(name, {}).get(kind, ()))

    def _resolve(self, kind: ResourceKind, ids: Iterable[str]) -> list[Entry]:
        table = self._entries[kind]
        return sorted((table[i] for i in ids if i in table), key=lambda entry: (entry.name, entry.id))

    @property
    def freshness(self) -> Freshness:
        return Freshness(self._synced, self._connected, self._last_contact, self._last_sync,
                         self._last_sync_duration, self.history.last_seq)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each batch of changes (synchronously, so it must not do I/O)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # ------------------------------------------------------------------ freshness (watcher only)
    def mark_contact(self) -> None:
        self._connected = True
        self._last_contact = time.time()

    def mark_disconnected(self) -> None:
        self._connected = False

    # ------------------------------------------------------------------ writes (watcher only)
    def upsert(self, kind: ResourceKind, raw: Raw) -> list[Change]:
        return self._commit(self._put(build_entry(kind, raw)))

    def remove(self, kind: ResourceKind, object_id: str) -> list[Change]:
        return self._commit(self._delete(kind, object_id))

    def replace_kind(self, kind: ResourceKind, raws: Iterable[Raw]) -> list[Change]:
        """Make one kind equal to a fresh engine listing (task reconciliation, per-kind resync)."""
        return self._commit(self._replace(kind, self._build_changed(kind, raws)))

    def replace_all(self, snapshot: Mapping[ResourceKind, Iterable[Raw]], duration: float | None = None
                    ) -> list[Change]:
        """Swap in a full engine listing, producing the create/update/remove changes against the old state."""
        built = {kind: self._build_changed(kind, snapshot.get(kind, ())) for kind in ENGINE_KINDS}
        changes: list[Change] = []
        for kind in ENGINE_KINDS:
            changes += self._replace(kind, built[kind])
        self._synced = True
        self._last_sync = time.time()
        self._last_sync_duration = duration
        self.mark_contact()
        return self._commit(changes)

    def _build_changed(self, kind: ResourceKind, raws: Iterable[Raw]) -> list[Entry]:
        """Entries for a listing, reusing the cached one wherever the engine's Version.Index is unchanged
        (most tasks on most polls), so a poll of 10,000 tasks derives only what changed."""
        table, entries = self._entries[kind], []
        for raw in raws:
            object_id, version = raw_identity(kind, raw)
            current = table.get(object_id)
            if current is not None and version is not None and current.version == version:
                entries.append(current)
            else:
                entries.append(build_entry(kind, raw))
        return entries

    def _replace(self, kind: ResourceKind, fresh: list[Entry]) -> list[Change]:
        fresh_ids = {entry.id for entry in fresh}
        changes: list[Change] = []
        for stale_id in [i for i in self._entries[kind] if i not in fresh_ids]:
            changes += self._delete(kind, stale_id)
        for entry in fresh:
            changes += self._put(entry)
        return changes

    def _put(self, entry: Entry) -> list[Change]:
        table = self._entries[entry.kind]
        old = table.get(entry.id)
        if old is entry or (old is not None and is_same(old, entry)):
            return []
        if old is not None:
            self._unindex(old)
        table[entry.id] = entry
        self._invalidate(entry.kind)
        self._index(entry)
        action = Action.CREATE if old is None else Action.UPDATE
        change = self.history.record(entry.kind, action, entry.id, entry.name,
                                     old.raw if old else None, entry.raw)
        self._touch_stacks(old, entry)
        return [change]

    def _delete(self, kind: ResourceKind, object_id: str) -> list[Change]:
        old = self._entries[kind].pop(object_id, None)
        if old is None:
            return []
        self._invalidate(kind)
        self._unindex(old)
        change = self.history.record(kind, Action.REMOVE, old.id, old.name, old.raw, None)
        self._touch_stacks(old, None)
        return [change]

    def _invalidate(self, kind: ResourceKind) -> None:
        self._lists[kind] = None
        for field in kind.spec.sort_fields:
            self._sorted.pop((kind, field), None)

    def _emit(self, changes: list[Change]) -> list[Change]:
        if changes:
            for listener in list(self._listeners):
                listener(changes)
        return changes

    # ------------------------------------------------------------------ indexes
    def _index(self, entry: Entry) -> None:
        if entry.kind is ResourceKind.TASK:
            self._tasks_by_service[str(entry.activation["service"])].add(entry.id)
            self._tasks_by_node[str(entry.activation["node"])].add(entry.id)
        elif entry.kind is ResourceKind.SERVICE:
            for kind, ids in service_references(entry).items():
                for target in ids:
                    self._refs[kind][target].add(entry.id)
        if entry.kind in _STACK_MEMBER_KINDS and (stack := stack_of(entry)):
            self._stack_members.setdefault(stack, {}).setdefault(entry.kind, set()).add(entry.id)

    def _unindex(self, entry: Entry) -> None:
        if entry.kind is ResourceKind.TASK:
            _discard(self._tasks_by_service, str(entry.activation["service"]), entry.id)
            _discard(self._tasks_by_node, str(entry.activation["node"]), entry.id)
        elif entry.kind is ResourceKind.SERVICE:
            for kind, ids in service_references(entry).items():
                for target in ids:
                    _discard(self._refs[kind], target, entry.id)
        if entry.kind in _STACK_MEMBER_KINDS and (stack := stack_of(entry)):
            members = self._stack_members.get(stack, {})
            members.get(entry.kind, set()).discard(entry.id)
            if not any(members.values()):
                self._stack_members.pop(stack, None)

    def _touch_stacks(self, old: Entry | None, new: Entry | None) -> None:
        for entry in (old, new):
            if entry is not None and entry.kind in _STACK_MEMBER_KINDS and (name := stack_of(entry)):
                self._touched_stacks.add(name)

    def _commit(self, changes: list[Change]) -> list[Change]:
        """Re-derive the stacks a write touched, once per write, then notify listeners.

        A stack exists while at least one service carries its label. Deriving after the whole write
        (not per member) keeps a full sync from recording intermediate stack states that never existed.
        """
        touched, self._touched_stacks = sorted(self._touched_stacks), set()
        for name in touched:
            members = self._stack_members.get(name, {})
            if members.get(ResourceKind.SERVICE):
                changes += self._put(build_entry(ResourceKind.STACK, self._stack_raw(name, members)))
            else:
                changes += self._delete(ResourceKind.STACK, name)
        return self._emit(changes)

    def _stack_raw(self, name: str, members: dict[ResourceKind, set[str]]) -> Raw:
        raw: Raw = {"name": name}
        for kind in _STACK_MEMBER_KINDS:
            raw[kind.spec.plural] = sorted(members.get(kind, ()))
        return raw


def _discard(index: dict[str, set[str]], key: str, value: str) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.discard(value)
        if not bucket:
            del index[key]
