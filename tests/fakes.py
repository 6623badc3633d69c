"""FakeEngine: an in-memory EngineClient for unit tests (speed only; every feature also has an
integration test against the real engine)."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
import gevent.queue

from app.resources import ENGINE_KINDS, ResourceKind

Raw = dict[str, Any]
# Called with ("list" | "inspect", kind, object id or None) after an answer is read and before it is
# returned: a test can block there to make the answer late (it is already decided, as on a real engine).
Hook = Callable[[str, ResourceKind, str | None], None]

Match = Callable[[str, ResourceKind, str | None], bool]


@dataclass
class Holds:
    """A Hook that blocks chosen engine answers (already read) until released, one call per ``hold``, and
    counts the calls entered, returned and in flight per (operation, kind, id)."""

    rules: list[tuple[Match, gevent.event.Event]] = field(default_factory=list)
    entered: Counter[tuple[str, ResourceKind, str | None]] = field(default_factory=Counter)
    returned: Counter[tuple[str, ResourceKind, str | None]] = field(default_factory=Counter)
    in_flight: Counter[tuple[str, ResourceKind, str | None]] = field(default_factory=Counter)
    max_in_flight: Counter[tuple[str, ResourceKind, str | None]] = field(default_factory=Counter)

    def hold(self, match: Match) -> gevent.event.Event:
        gate = gevent.event.Event()
        self.rules.append((match, gate))
        return gate

    def __call__(self, op: str, kind: ResourceKind, object_id: str | None) -> None:
        key = (op, kind, object_id)
        self.entered[key] += 1
        self.in_flight[key] += 1
        self.max_in_flight[key] = max(self.max_in_flight[key], self.in_flight[key])
        try:
            for match, gate in list(self.rules):
                if match(op, kind, object_id):
                    self.rules.remove((match, gate))  # one call per rule
                    gate.wait(5)
                    break
        finally:
            self.in_flight[key] -= 1
            self.returned[key] += 1


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


class DelayedStream:
    """An event stream that, on a seeded schedule, goes silent for a while: the events of that window are
    lost, as when a connection stalls on a live engine (only a resync can find what they announced)."""

    def __init__(self, inner: Any, engine: DelayedEngine) -> None:
        self._inner, self._engine = inner, engine

    def __iter__(self) -> Iterator[Raw]:
        for message in self._inner:
            if self._engine.silent():
                self._engine.counts["events dropped"] += 1
                continue
            yield message

    def close(self) -> None:
        self._inner.close()


class DelayedEngine:
    """Wraps any EngineClient and makes its answers late on a seeded schedule, the answer being read first
    (as an engine decides it) and delivered after the delay: slow inspects, slow listings, task listings
    held until a newer task listing has been delivered (reordered), and an event stream that goes silent.
    ``scale`` multiplies every delay (milliseconds for FakeEngine, tenths of seconds for the lab engine)."""

    def __init__(self, inner: Any, seed: int, scale: float = 1.0, silence_every: float = 20.0,
                 silence_for: float = 1.5) -> None:
        import random
        import time

        self._inner, self._rng, self._scale = inner, random.Random(seed), scale
        self._clock = time.monotonic
        self._silence_every, self._silence_for = silence_every, silence_for
        self._silent_until = 0.0
        self._next_silence = self._clock() + self._rng.uniform(0.5, 1.5) * silence_every
        self._task_listings = 0   # task listings delivered so far
        self.counts: dict[str, int] = {"slow inspects": 0, "slow listings": 0, "held task listings": 0,
                                       "events dropped": 0, "silences": 0}

    def _delay(self, up_to: float) -> None:
        gevent.sleep(self._rng.uniform(0, up_to) * self._scale)   # the injected slowness is the point

    def silent(self) -> bool:
        now = self._clock()
        if now >= self._next_silence:
            self._silent_until = now + self._silence_for
            self._next_silence = now + self._rng.uniform(0.5, 1.5) * self._silence_every
            self.counts["silences"] += 1
        return now < self._silent_until

    def list(self, kind: ResourceKind) -> list[Raw]:
        answer: list[Raw] = self._inner.list(kind)
        roll = self._rng.random()
        if kind is ResourceKind.TASK and roll < 0.15:
            # Deliver after a newer task listing (the reconciliation's next one), or after a bound.
            self.counts["held task listings"] += 1
            delivered, deadline = self._task_listings, self._clock() + 3.0 * self._scale
            while self._task_listings == delivered and self._clock() < deadline:
                gevent.sleep(0.01 * self._scale)   # the poll interval of this bounded hold
        elif roll < 0.4:
            self.counts["slow listings"] += 1
            self._delay(1.0)
        if kind is ResourceKind.TASK:
            self._task_listings += 1
        return answer

    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None:
        answer: Raw | None = self._inner.inspect(kind, object_id)
        if self._rng.random() < 0.3:
            self.counts["slow inspects"] += 1
            self._delay(1.0)
        return answer

    def events(self, since: float | None = None) -> DelayedStream:
        return DelayedStream(self._inner.events(since), self)

    def close(self) -> None:
        self._inner.close()


class HookedStream:
    def __init__(self, inner: Any, engine: HookedEngine) -> None:
        self._inner, self._engine = inner, engine

    def __iter__(self) -> Iterator[Raw]:
        for message in self._inner:
            if not self._engine.muted:
                yield message

    def close(self) -> None:
        self._inner.close()


class HookedEngine:
    """Wraps any EngineClient (the lab's DockerEngine): ``hook`` runs after each answer is read and before
    it is returned; ``muted`` swallows events (a silent stream); ``refuse_events`` fails new streams."""

    def __init__(self, inner: Any, hook: Hook) -> None:
        self._inner, self.hook = inner, hook
        self.muted = self.refuse_events = False
        self.streams: list[HookedStream] = []

    def list(self, kind: ResourceKind) -> list[Raw]:
        answer: list[Raw] = self._inner.list(kind)
        self.hook("list", kind, None)
        return answer

    def inspect(self, kind: ResourceKind, object_id: str) -> Raw | None:
        answer: Raw | None = self._inner.inspect(kind, object_id)
        self.hook("inspect", kind, object_id)
        return answer

    def events(self, since: float | None = None) -> HookedStream:
        if self.refuse_events:
            from app.engine.client import EngineUnavailable
            raise EngineUnavailable("event stream refused by the test")
        stream = HookedStream(self._inner.events(since), self)
        self.streams.append(stream)
        return stream

    def close_streams(self) -> None:
        for stream in self.streams:
            stream.close()

    def close(self) -> None:
        self._inner.close()
