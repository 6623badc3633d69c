"""Checks shared by the coherence tests (FakeEngine and lab engine): the change records tell the exact story.

``Recorder`` takes the cache's state as the starting snapshot and, from that instant, every change batch
the cache emits. ``problems`` replays the records over the snapshot and reports where they disagree with
the final cache, where a record's ``before`` is not what the story held, where ``Version.Index`` went down
within one object, and where a removed object came back (a resurrection: ids are never reused here).
"""

from __future__ import annotations

from typing import Any

from app.cache.history import Action, Change
from app.cache.store import Cache
from app.resources import ResourceKind

Key = tuple[ResourceKind, str]


def _state(cache: Cache) -> dict[Key, dict[str, Any]]:
    return {(kind, entry.id): entry.raw for kind in ResourceKind for entry in cache.entries(kind)}


def _version(raw: dict[str, Any] | None) -> int | None:
    index = ((raw or {}).get("Version") or {}).get("Index")
    return index if isinstance(index, int) else None


class Recorder:
    def __init__(self, cache: Cache) -> None:
        self.start = _state(cache)
        self.changes: list[Change] = []
        self._unsubscribe = cache.subscribe(self.changes.extend)

    def close(self) -> None:
        self._unsubscribe()

    def problems(self, cache: Cache) -> list[str]:
        state = dict(self.start)
        removed: set[Key] = set()
        out: list[str] = []
        for change in self.changes:
            key = (change.kind, change.id)
            name = f"#{change.seq} {change.kind.value} {change.id} {change.action.value}"
            if change.action is Action.REF_CHANGED:
                continue
            if change.action is Action.CREATE:
                if key in state:
                    out.append(f"{name}: created but already present")
                if key in removed:
                    out.append(f"{name}: re-created after its removal (remove+create pair)")
                state[key] = change.after or {}
                continue
            if key not in state:
                out.append(f"{name}: {change.action.value} of an object the story does not hold")
            elif change.before != state[key]:
                out.append(f"{name}: 'before' differs from the replayed state")
            if change.action is Action.UPDATE:
                old, new = _version(state.get(key)), _version(change.after)
                if old is not None and new is not None and new < old:
                    out.append(f"{name}: Version.Index went down {old} -> {new}")
                state[key] = change.after or {}
            elif change.action is Action.REMOVE:
                state.pop(key, None)
                removed.add(key)
        final = _state(cache)
        for key in sorted(set(state) | set(final), key=lambda k: (k[0].value, k[1])):
            label = f"{key[0].value} {key[1]}"
            if key not in final:
                out.append(f"replay holds {label}, the cache does not")
            elif key not in state:
                out.append(f"the cache holds {label}, the replay does not")
            elif state[key] != final[key]:
                out.append(f"replay and cache differ on {label}")
        return out
