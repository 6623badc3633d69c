"""The in-memory cluster state: one dict of entries per kind, the indexes over them, derived stacks,
freshness, and the change records every mutation produces.

Only the watcher writes here; blueprints only read. No method does I/O, so under gevent each mutation
completes before any reader runs.

Engine answers arrive late and out of order (two inspects of one object, a slow listing overtaken by a
faster one), so every watcher write carries a token, ``write_token()`` taken before the engine call. Tokens
and writes share one logical clock that every token and every write advances, so a write is "after" a
token exactly when it happened after the call started, and two calls never share a token (with the change
sequence number as the token, two calls started with no write between were unorderable, and a late answer
could re-create an object whose NotFound had landed first). Each entry keeps the stamp of the write that
stored it, and ``Tombstones`` keeps those of recent removals, and of NotFound answers for objects the cache
did not hold. With them an answer is judged per object (``apply_inspect``, ``apply_listing``,
``replace_all``):

- an object whose engine ``Version.Index`` is older than the cached one never replaces it (equal: unchanged);
- an object removed after the token is not re-created: a removal is never undone by a late answer;
- an object without a version (networks, volumes) written after the token is left alone;
- an object missing from the answer (NotFound, or absent from a listing) is removed only if it was not
  (re)created or written after the token;
- a listing older than the one already applied to its scope (a kind, or one service's tasks; a full
  listing of tasks covers every service) is dropped whole; a listing never touches objects outside its scope.

After the primary changes of a write come the derived stack changes, then ``ref_changed`` records for the
objects whose representation the write changed through a cross-reference (``app.cache.refs``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from app.cache.entries import Entry, Raw, build_entry, is_same, raw_identity, service_references, stack_of
from app.cache.history import DEFAULT_MAX_BYTES, Action, Change, History
from app.cache.listings import Listing, prepare_listing
from app.cache.refs import affected
from app.cache.tombstones import Tombstones
from app.resources import ENGINE_KINDS, ResourceKind

Listener = Callable[[list[Change]], None]
Key = tuple[ResourceKind, str]
Scope = tuple[ResourceKind, str | None]   # a kind, or (tasks, service id)
_STACK_MEMBER_KINDS = (ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET,
                       ResourceKind.NETWORK, ResourceKind.VOLUME)
_REF_KINDS = (ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME)
FAILED_STATES = frozenset({"failed", "rejected"})   # task states that count as a failure


class InspectOutcome(Enum):
    APPLIED = "applied"       # the cache changed
    UNCHANGED = "unchanged"   # the answer agrees with the cache
    STALE = "stale"           # the answer is older than what the cache holds; ignored


@dataclass(frozen=True, slots=True)
class Freshness:
    """What a reader needs to know to not mistake stale state for current."""

    synced: bool                 # the first full sync has completed
    connected: bool              # the event stream is connected and being read right now
    last_contact: float | None   # wall-clock time of the last successful engine contact
    last_sync: float | None      # wall-clock time of the last completed full sync
    last_sync_duration: float | None
    seq: int                     # sequence number of the latest change


class Cache:
    def __init__(self, history_capacity: int = 10_000, history_max_bytes: int = DEFAULT_MAX_BYTES,
                 tombstones: Tombstones | None = None) -> None:
        self._entries: dict[ResourceKind, dict[str, Entry]] = {kind: {} for kind in ResourceKind}
        self._versions: dict[ResourceKind, dict[str, int | None]] = {kind: {} for kind in ResourceKind}
        self._lists: dict[ResourceKind, list[Entry] | None] = dict.fromkeys(ResourceKind)
        self._sorted: dict[tuple[ResourceKind, str], list[Entry]] = {}
        self._tasks_by_service: dict[str, set[str]] = defaultdict(set)
        self._tasks_by_node: dict[str, set[str]] = defaultdict(set)
        self._running: dict[str, int] = {}           # service id → tasks in state running
        self._failed: dict[str, set[str]] = defaultdict(set)   # service id → its failed or rejected tasks
        self._refs: dict[ResourceKind, dict[str, set[str]]] = {k: defaultdict(set) for k in _REF_KINDS}
        self._stack_members: dict[str, dict[ResourceKind, set[str]]] = {}
        self.history = History(history_capacity, history_max_bytes)
        self._tombstones = tombstones if tombstones is not None else Tombstones()
        self._listed: dict[Scope, int] = {}          # scope → token of the newest listing applied to it
        self._clock = 0                              # logical time of tokens and writes
        self._ref_times: dict[Key, float] = {}
        # Collected during one write, consumed by _commit.
        self._touched_stacks: set[str] = set()
        self._ref_candidates: dict[Key, None] = {}
        self._running_before: dict[str, int] = {}
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

    def task_ids_of_service(self, service_id: str) -> Collection[str]:
        return self._tasks_by_service.get(service_id, ())

    def task_ids_of_node(self, node_id: str) -> Collection[str]:
        return self._tasks_by_node.get(node_id, ())

    def running_tasks(self, service_id: str) -> int:
        """How many of the service's tasks are in state running (kept on write: O(1))."""
        return self._running.get(service_id, 0)

    def failed_tasks(self, service_id: str) -> list[Entry]:
        """The service's tasks in state failed or rejected (kept on write: no walk over all its tasks)."""
        return self._resolve(ResourceKind.TASK, self._failed.get(service_id, ()))

    def services_using(self, kind: ResourceKind, object_id: str) -> list[Entry]:
        return self._resolve(ResourceKind.SERVICE, self._refs[kind].get(object_id, ()))

    def stack_members(self, name: str, kind: ResourceKind) -> list[Entry]:
        return self._resolve(kind, self._stack_members.get(name, {}).get(kind, ()))

    def _resolve(self, kind: ResourceKind, ids: Iterable[str]) -> list[Entry]:
        table = self._entries[kind]
        return sorted((table[i] for i in ids if i in table), key=lambda entry: (entry.name, entry.id))

    def ref_changed_at(self, kind: ResourceKind, object_id: str) -> float | None:
        """Wall-clock time of the latest ``ref_changed`` record of an object (None: never, or removed)."""
        return self._ref_times.get((kind, object_id))

    @property
    def freshness(self) -> Freshness:
        return Freshness(self._synced, self._connected, self._last_contact, self._last_sync,
                         self._last_sync_duration, self.history.last_seq)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each batch of changes (synchronously, so it must not do I/O)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # ------------------------------------------------------------------ freshness (watcher only)
    def set_stream_connected(self, connected: bool) -> None:
        """The event stream is (or is no longer) connected and being read: the only source of "live"."""
        self._connected = connected
        if connected:
            self._last_contact = time.time()

    def mark_contact(self) -> None:
        """An engine call succeeded; says nothing about the event stream, so ``connected`` is unchanged."""
        self._last_contact = time.time()

    def mark_disconnected(self) -> None:
        self.set_stream_connected(False)

    # ------------------------------------------------------------------ watcher writes
    def write_token(self) -> int:
        """Take before an engine call and pass to the ``apply_*`` call that stores its answer: a logical
        time, later than every write so far and every earlier token."""
        return self._tick()

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def apply_inspect(self, kind: ResourceKind, object_id: str, raw: Raw | None, token: int
                      ) -> InspectOutcome:
        """Store one inspect answer (None: the engine said NotFound) unless it is older than the cache."""
        if kind not in ENGINE_KINDS:
            raise ValueError(f"{kind.value} objects are derived by the cache, not inspected")
        self._tombstones.prune()
        if raw is None:
            current = self._entries[kind].get(object_id)
            if current is None:
                self._note_absent(kind, object_id, token)
                return InspectOutcome.UNCHANGED
            if current.written > token:
                return InspectOutcome.STALE
            self._commit(self._delete(kind, object_id))
            return InspectOutcome.APPLIED
        judged = self._judge(kind, raw, token)
        if not isinstance(judged, Entry):
            return judged
        changes = self._commit(self._put(judged))
        return InspectOutcome.APPLIED if changes else InspectOutcome.UNCHANGED

    def apply_listing(self, kind: ResourceKind, raws: Iterable[Raw] | Listing, token: int,
                      service_id: str | None = None) -> list[Change] | None:
        """Reconcile a listing of a whole kind, or (tasks only) of one service's tasks, with the cache.

        ``raws`` may be a ``Listing`` prepared off the hub (``app.cache.listings``), which makes an
        unchanged listing cost a dict comparison. Returns the changes, or None when a newer listing of the
        same scope was already applied.
        """
        if kind not in ENGINE_KINDS:
            raise ValueError(f"{kind.value} objects are derived by the cache, not listed")
        if service_id is not None and kind is not ResourceKind.TASK:
            raise ValueError("only task listings can be scoped to a service")
        pending = self.start_listing(kind, raws, token, service_id)
        return None if pending is None else pending.step()

    def start_listing(self, kind: ResourceKind, raws: Iterable[Raw] | Listing, token: int,
                      service_id: str | None = None) -> PendingListing | None:
        """``apply_listing`` in parts: None when a newer listing of the scope was applied, else the objects
        that differ (found at once, in C), for the caller to apply with ``PendingListing.step``.

        Why: when thousands of tasks change at once (a service scaled to 10,000), applying them is ~50 µs
        each on the one worker thread; in parts of a few hundred, with the caller giving the event loop a
        turn between two, no request waits for the whole listing. Each part is one complete write (its own
        change batch, stacks and ``ref_changed``) and judges each of its objects when it is applied, under
        the same per-object rules as a whole listing, so writes landing between two parts are respected."""
        if kind not in ENGINE_KINDS:
            raise ValueError(f"{kind.value} objects are derived by the cache, not listed")
        if service_id is not None and kind is not ResourceKind.TASK:
            raise ValueError("only task listings can be scoped to a service")
        listing = self._prepared(kind, raws, service_id)
        if token < self._listing_token(kind, service_id):
            return None
        self._tombstones.prune()
        gone, differing = self._differences(listing, token)
        self._note_listing(kind, service_id, token)
        return PendingListing(self, listing, token, gone, differing)

    def replace_all(self, snapshot: Mapping[ResourceKind, Iterable[Raw] | Listing], token: int | None = None,
                    duration: float | None = None) -> list[Change]:
        """Apply a full listing of every engine kind (a kind missing from ``snapshot`` lists as empty) with
        the per-object rules of ``apply_listing``; a kind whose applied listing is newer is skipped.
        ``token`` None means "taken now": the snapshot is authoritative (tests, benchmarks)."""
        token = self._tick() if token is None else token
        self._tombstones.prune()
        changes: list[Change] = []
        for kind in ENGINE_KINDS:
            if token >= self._listing_token(kind, None):
                changes += self._reconcile(self._prepared(kind, snapshot.get(kind, ()), None), token)
                self._note_listing(kind, None, token)
        self._synced = True
        self._last_sync = self._last_contact = time.time()
        self._last_sync_duration = duration
        return self._commit(changes)

    # ------------------------------------------------------------------ restoring persisted state (app.store)
    def restore(self, entries: Iterable[Entry], records: Iterable[Change], last_seq: int) -> None:
        """Load the state an earlier process persisted, before the watcher starts: the engine objects
        (``build_entry`` results, which may be built off the hub; stacks are derived again here), the
        history ring and its sequence.

        Nothing is emitted or recorded: the service was down, so what changed meanwhile is for the first
        full sync to find by diffing the engine against this state, numbered after ``last_seq``. Freshness
        stays "not synced" until that sync. Only an empty, never-written cache can be restored."""
        if self._clock or self.history.last_seq or any(self._entries.values()):
            raise ValueError("only an empty cache can be restored")
        for entry in entries:
            if entry.kind not in ENGINE_KINDS:
                raise ValueError(f"{entry.kind.value} objects are derived by the cache, not restored")
            self._place(entry)
        for name, members in list(self._stack_members.items()):
            if members.get(ResourceKind.SERVICE):
                self._place(build_entry(ResourceKind.STACK, self._stack_raw(name, members)))
        self.history.restore(records, last_seq)
        for change in self.history.newest_first():
            key = (change.kind, change.id)
            if (change.action is Action.REF_CHANGED and key not in self._ref_times
                    and change.id in self._entries[change.kind]):
                self._ref_times[key] = change.timestamp

    def _place(self, entry: Entry) -> None:
        """Store an entry with its indexes, without a change record (``restore`` only)."""
        self._store(entry, self._entries[entry.kind].get(entry.id))
        entry.written = self._tick()

    def _store(self, entry: Entry, old: Entry | None) -> None:
        """Put ``entry`` in its table and indexes in place of ``old``."""
        if old is not None:
            self._unindex(old)
        self._entries[entry.kind][entry.id] = entry
        self._versions[entry.kind][entry.id] = entry.version
        self._invalidate(entry.kind)
        self._index(entry)

    # ------------------------------------------------------------------ unconditional writes (tests, benches)
    def upsert(self, kind: ResourceKind, raw: Raw) -> list[Change]:
        """Store an object as given, whatever the cache holds."""
        return self._commit(self._put(build_entry(kind, raw)))

    def remove(self, kind: ResourceKind, object_id: str) -> list[Change]:
        return self._commit(self._delete(kind, object_id))

    # ------------------------------------------------------------------ judging answers
    def _judge(self, kind: ResourceKind, raw: Raw, token: int) -> Entry | InspectOutcome:
        """The entry to store for one object of an answer, or why nothing is stored."""
        object_id, version = raw_identity(kind, raw)
        current = self._entries[kind].get(object_id)
        if current is None:
            return build_entry(kind, raw) if self._may_create(kind, object_id, token) else InspectOutcome.STALE
        if version is not None and current.version is not None:
            if version < current.version:
                return InspectOutcome.STALE
            if version == current.version:
                return InspectOutcome.UNCHANGED
            return build_entry(kind, raw)
        if current.written > token:
            return InspectOutcome.STALE
        entry = build_entry(kind, raw)
        return InspectOutcome.UNCHANGED if is_same(current, entry) else entry

    def _note_absent(self, kind: ResourceKind, object_id: str, token: int) -> None:
        """A NotFound for an object the cache does not hold: remember it like a removal, so an answer that
        started earlier (it may have read the object before the engine removed it) cannot create it."""
        key = (kind, object_id)
        removed = self._tombstones.removed_at(key)
        if removed is None or removed < token:
            self._tombstones.add(key, self._tick())

    def _may_create(self, kind: ResourceKind, object_id: str, token: int) -> bool:
        removed = self._tombstones.removed_at((kind, object_id))
        if removed is not None:
            return removed <= token
        return token >= self._tombstones.floor

    def _listing_token(self, kind: ResourceKind, service_id: str | None) -> int:
        full = self._listed.get((kind, None), -1)
        return full if service_id is None else max(full, self._listed.get((kind, service_id), -1))

    def _note_listing(self, kind: ResourceKind, service_id: str | None, token: int) -> None:
        self._listed[(kind, service_id)] = max(token, self._listed.get((kind, service_id), -1))
        if service_id is None:  # a full listing covers every service scope of the kind: forget older ones
            for scope in [s for s, t in self._listed.items() if s[0] is kind and s[1] is not None and t <= token]:
                del self._listed[scope]

    @staticmethod
    def _prepared(kind: ResourceKind, raws: Iterable[Raw] | Listing, service_id: str | None) -> Listing:
        if not isinstance(raws, Listing):
            return prepare_listing(kind, raws, service_id)
        if raws.kind is not kind or raws.service_id != service_id:
            raise ValueError(f"a listing of {raws.kind.value} ({raws.service_id}) applied as {kind.value} "
                             f"({service_id})")
        return raws

    def _reconcile(self, listing: Listing, token: int) -> list[Change]:
        """The changes that make a scope agree with a listing under the per-object rules (one write)."""
        gone, differing = self._differences(listing, token)
        return self._reconcile_part(listing, token, gone, differing)

    def _differences(self, listing: Listing, token: int) -> tuple[list[str], list[str]]:
        """The cached objects of the scope the listing no longer shows, and the listed objects that differ
        from the cache (engine order).

        Objects whose Version.Index is unchanged (most tasks on most polls) are found by comparing the
        listing's id → version map with the cache's in C, so only the objects that differ are walked;
        objects without a version are compared by content later, one by one (networks and volumes: few)."""
        known = self._versions[listing.kind]
        if listing.service_id is not None:
            known = {i: known[i] for i in self._tasks_by_service.get(listing.service_id, ())}
        if listing.versioned:
            if listing.versions == known:
                return [], []
            differing = {object_id for object_id, _ in listing.versions.items() - known.items()}
        else:
            differing = set(listing.versions)
        table = self._entries[listing.kind]
        gone = sorted(i for i in known.keys() - listing.versions.keys() if table[i].written <= token)
        return gone, sorted(differing, key=listing.positions.__getitem__)

    def _reconcile_part(self, listing: Listing, token: int, gone: Iterable[str],
                        differing: Iterable[str]) -> list[Change]:
        """Remove ``gone`` and write ``differing`` under the per-object rules, judged now."""
        kind = listing.kind
        table = self._entries[kind]
        fresh: list[Entry] = []
        for object_id in differing:
            judged = self._judge(kind, listing.raws[listing.positions[object_id]], token)
            if isinstance(judged, Entry):
                fresh.append(judged)
        changes: list[Change] = []
        for object_id in gone:
            old = table.get(object_id)
            if old is not None and old.written <= token:
                changes += self._delete(kind, object_id)
        for entry in fresh:
            changes += self._put(entry)
        return changes

    # ------------------------------------------------------------------ mutations
    def _put(self, entry: Entry) -> list[Change]:
        old = self._entries[entry.kind].get(entry.id)
        if old is entry or (old is not None and is_same(old, entry)):
            return []
        self._before_write(old, entry)
        self._store(entry, old)
        action = Action.CREATE if old is None else Action.UPDATE
        change = self.history.record(entry.kind, action, entry.id, entry.name, old.raw if old else None,
                                     entry.raw, (old.size if old else 0) + entry.size)
        entry.written = self._tick()
        self._tombstones.discard((entry.kind, entry.id))
        return [change]

    def _delete(self, kind: ResourceKind, object_id: str) -> list[Change]:
        old = self._entries[kind].get(object_id)
        if old is None:
            return []
        self._before_write(old, None)
        del self._entries[kind][object_id]
        del self._versions[kind][object_id]
        self._invalidate(kind)
        self._unindex(old)
        change = self.history.record(kind, Action.REMOVE, old.id, old.name, old.raw, None, old.size)
        if kind in ENGINE_KINDS:
            self._tombstones.add((kind, object_id), self._tick())
        self._ref_times.pop((kind, object_id), None)
        return [change]

    def _before_write(self, old: Entry | None, new: Entry | None) -> None:
        """Note what the write will touch beyond the object itself: stacks to re-derive, objects whose
        representation embeds it, and (tasks) the service's running count before the write."""
        for task in (old, new):
            if task is not None and task.kind is ResourceKind.TASK:
                service_id = str(task.activation["service"])
                self._running_before.setdefault(service_id, self._running.get(service_id, 0))
        for candidate in affected(old, new, self):
            self._ref_candidates[candidate] = None
        for member in (old, new):
            if member is not None and member.kind in _STACK_MEMBER_KINDS and (name := stack_of(member)):
                self._touched_stacks.add(name)

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
            service_id = str(entry.activation["service"])
            self._tasks_by_service[service_id].add(entry.id)
            self._tasks_by_node[str(entry.activation["node"])].add(entry.id)
            if entry.activation["state"] == "running":
                self._running[service_id] = self._running.get(service_id, 0) + 1
            elif entry.activation["state"] in FAILED_STATES:
                self._failed[service_id].add(entry.id)
        elif entry.kind is ResourceKind.SERVICE:
            for kind, ids in service_references(entry).items():
                for target in ids:
                    self._refs[kind][target].add(entry.id)
        if entry.kind in _STACK_MEMBER_KINDS and (stack := stack_of(entry)):
            self._stack_members.setdefault(stack, {}).setdefault(entry.kind, set()).add(entry.id)

    def _unindex(self, entry: Entry) -> None:
        if entry.kind is ResourceKind.TASK:
            service_id = str(entry.activation["service"])
            _discard(self._tasks_by_service, service_id, entry.id)
            _discard(self._tasks_by_node, str(entry.activation["node"]), entry.id)
            if entry.activation["state"] in FAILED_STATES:
                _discard(self._failed, service_id, entry.id)
            if entry.activation["state"] == "running":
                remaining = self._running[service_id] - 1
                if remaining:
                    self._running[service_id] = remaining
                else:
                    del self._running[service_id]
        elif entry.kind is ResourceKind.SERVICE:
            for kind, ids in service_references(entry).items():
                for target in ids:
                    _discard(self._refs[kind], target, entry.id)
        if entry.kind in _STACK_MEMBER_KINDS and (stack := stack_of(entry)):
            members = self._stack_members.get(stack, {})
            members.get(entry.kind, set()).discard(entry.id)
            if not any(members.values()):
                self._stack_members.pop(stack, None)

    # ------------------------------------------------------------------ one write, committed
    def _commit(self, changes: list[Change]) -> list[Change]:
        """Finish a write: re-derive the stacks it touched, record its ``ref_changed``, notify listeners."""
        changes += self._derive_stacks()
        changes += self._record_refs(changes)
        return self._emit(changes)

    def _derive_stacks(self) -> list[Change]:
        """A stack exists while at least one service carries its label. Deriving once after the whole write
        (not per member) keeps a full sync from recording intermediate stack states that never existed."""
        touched, self._touched_stacks = sorted(self._touched_stacks), set()
        changes: list[Change] = []
        for name in touched:
            members = self._stack_members.get(name, {})
            if members.get(ResourceKind.SERVICE):
                changes += self._put(build_entry(ResourceKind.STACK, self._stack_raw(name, members)))
            else:
                changes += self._delete(ResourceKind.STACK, name)
        return changes

    def _record_refs(self, changes: list[Change]) -> list[Change]:
        """One ``ref_changed`` per object whose representation the write changed through another object,
        after the changes that caused it; none for objects the write created, updated or removed itself."""
        candidates, self._ref_candidates = self._ref_candidates, {}
        running_before, self._running_before = self._running_before, {}
        for service_id, before in running_before.items():
            # A stack shows its services' RunningTasks: only a net change of the count matters.
            service = self._entries[ResourceKind.SERVICE].get(service_id)
            if service is not None and self._running.get(service_id, 0) != before and (name := stack_of(service)):
                candidates[(ResourceKind.STACK, name)] = None
        if not candidates:
            return []
        own = {(change.kind, change.id) for change in changes}
        recorded: list[Change] = []
        for kind, object_id in candidates:
            entry = self._entries[kind].get(object_id)
            if entry is None or (kind, object_id) in own:
                continue
            change = self.history.record(kind, Action.REF_CHANGED, object_id, entry.name, None, None)
            self._ref_times[(kind, object_id)] = change.timestamp
            recorded.append(change)
        return recorded

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


class PendingListing:
    """A listing being applied in parts (``Cache.start_listing``); ``step`` applies the next part."""

    __slots__ = ("_cache", "_differing", "_gone", "_listing", "_token")

    def __init__(self, cache: Cache, listing: Listing, token: int, gone: list[str], differing: list[str]) -> None:
        self._cache = cache
        self._listing = listing
        self._token = token
        self._gone = gone
        self._differing = differing

    @property
    def done(self) -> bool:
        return not self._gone and not self._differing

    @property
    def remaining(self) -> int:
        return len(self._gone) + len(self._differing)

    def step(self, max_objects: int | None = None) -> list[Change]:
        """Apply up to ``max_objects`` more objects (removals first) as one write; all of them when None.
        Returns the write's changes (emitted to listeners like any write's)."""
        budget = self.remaining if max_objects is None else max(1, max_objects)
        gone, self._gone = self._gone[:budget], self._gone[budget:]
        budget -= len(gone)
        differing, self._differing = self._differing[:budget], self._differing[budget:]
        cache = self._cache
        return cache._commit(cache._reconcile_part(self._listing, self._token, gone, differing))
