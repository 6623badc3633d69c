"""Live tails: the producer that turns open engine follow streams into SSE events (``app.http.live``).

The engine streams are opened by the view, before the response starts, so a failure is a LOG008 problem
rather than an empty 200. The producer then runs in its own greenlet (one more per extra stream, for a
stack); killed when the client goes away or the worker exits, it kills its readers, whose ``finally``
closes their engine responses. Each line is one event with no ``event:`` name, ``id: <timestamp>`` and
``data: <LogLine JSON>`` (docs/logs.md). A stream that breaks off or sends garbage ends the response
(logged); the client reconnects with ``Last-Event-ID`` and loses nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

import gevent

from app.cooperate import pause
from app.engine.logs import EngineLogs, FrameError, LogReader, LogReadFailed, LogTarget
from app.http.live import Emit, frame
from app.logs.errors import engine_problems
from app.logs.labels import Labeller
from app.logs.params import LogQuery
from app.logs.reading import PAUSE_EVERY

log = logging.getLogger(__name__)


def open_follow(engine: EngineLogs, targets: Sequence[LogTarget], since_ns: int,
                stream: str | None) -> list[LogReader]:
    """Open every target's follow stream, or none (LOG008 / 404 after closing those already open)."""
    readers: list[LogReader] = []
    try:
        with engine_problems(live=True):
            for target in targets:
                readers.append(engine.open(target, follow=True, since_ns=since_ns, stream=stream))
    except BaseException:
        close_all(readers)
        raise
    return readers


def close_all(readers: Sequence[LogReader]) -> None:
    for reader in readers:
        reader.close()


def encode_event(line_json: dict[str, object], timestamp: str) -> bytes:
    return frame(json.dumps(line_json, ensure_ascii=False, separators=(",", ":")).encode(), event_id=timestamp)


def tail_producer(readers: Sequence[LogReader], query: LogQuery, labeller: Labeller) -> Callable[[Emit], None]:
    def pump(reader: LogReader, emit: Emit) -> None:
        try:
            handled = 0
            for batch in reader.batches():
                for line in batch:
                    if query.keeps(line):
                        labeller.label(line)
                        emit(encode_event(line.to_json(), line.timestamp))
                handled += len(batch)
                if handled >= PAUSE_EVERY:
                    handled = 0
                    pause()
        except (LogReadFailed, FrameError) as exc:
            log.warning("log tail ended by the engine stream: %s", exc)
        finally:
            reader.close()

    def produce(emit: Emit) -> None:
        if len(readers) == 1:
            pump(readers[0], emit)
            return
        workers = [gevent.spawn(pump, reader, emit) for reader in readers]
        try:
            # the stream ends when the first engine stream ends or fails (a stack's service removed...)
            gevent.wait(workers, count=1)
            for worker in workers:
                if worker.dead and worker.exception is not None:
                    log.warning("a log tail of a stack ended with %r", worker.exception)
        finally:
            gevent.killall(workers, block=True, timeout=2)
            close_all(readers)

    return produce
