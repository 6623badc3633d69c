"""FakeEngine: an in-memory EngineClient for unit tests (speed only; every feature also has an
integration test against the real engine)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import gevent.queue

from app.resources import ENGINE_KINDS, ResourceKind

Raw = dict[str, Any]
# Called with ("list" | "inspect", kind, object id or None) after an answer is read and before it is
# returned: a test can block there to make the answer late (it is already decided, as on a real engine).
Hook = Callable[[str, ResourceKind, str | None], None]


class FakeStream:
    def __init__(self) -> None:
        self.queue: gevent.queue.Queue[Raw | None] = gevent.queue.Queue()
        self.closed = False

    def __iter__(self) -> Iterator[Raw]:
        while True:
            message = self.queue.get()
            if message is None or self.closed:
                return
            yield message

    def close(self) -> None:
        self.closed = True
        self.queue.put(None)


class FakeEngine:
    def __init__(self, objects: dict[ResourceKind, list[Raw]] | None = None) -> None:
        self.objects: dict[ResourceKind, dict[str, Raw]] = {kind: {} for kind in ENGINE_KINDS}
        for kind, raws in (objects or {}).items():
            for raw in raws:
                self.objects[kind][self.key(kind, raw)] = raw
        self.streams: list[FakeStream] = []
        self.available = True
        self.hook: Hook | None = None

    @staticmethod
    def key(kind: ResourceKind, raw: Raw) -> str:
        if kind is ResourceKind.VOLUME:
            return str(raw["Name"])
        return str(raw.get("ID") or raw.get("Id"))

    def _check(self) -> None:
        if not self.available:
            from app.engine.client import EngineUnavailable
            raise EngineUnavailable("fake engine is down")

    def list(self, kind: ResourceKind) -> list[Raw]:
        self._check()
        answer = [copy.deepcopy(raw) for raw in self.objects[kind].values()]
        if self.hook is not None:
            self.hook("list", kind, None)
        return answer

    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None:
        self._check()
        raw = self.objects[kind].get(object_id)
        answer = copy.deepcopy(raw) if raw is not None else None
        if self.hook is not None:
            self.hook("inspect", kind, object_id)
        return answer

    def events(self, since: float | None = None) -> FakeStream:
        self._check()
        stream = FakeStream()
        self.streams.append(stream)
        return stream

    def emit(self, event_type: str, action: str, actor_id: str, **attributes: str) -> None:
        for stream in self.streams:
            if not stream.closed:
                stream.queue.put({"Type": event_type, "Action": action,
                                  "Actor": {"ID": actor_id, "Attributes": attributes}})

    def close(self) -> None:
        for stream in self.streams:
            stream.close()
