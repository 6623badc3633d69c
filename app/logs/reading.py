"""One-shot log reads (the JSON page and the text download): every target read at once, within a deadline.

The engine ends a non-follow stream by itself; as a safety net a read is cut :data:`ONE_SHOT_IDLE` seconds
after its last frame (the read timeout, ``app.engine.logs``) and the whole read after
:data:`ONE_SHOT_DEADLINE` seconds, answering what arrived by then. Each target is read in its own greenlet
(a stack's services in parallel, at most :data:`PARALLEL` at a time); each closes its response in
``finally``, so a cut or an abandoned request leaves no engine stream open.
"""

from __future__ import annotations

from collections.abc import Sequence

import gevent
from gevent.pool import Pool

from app.cooperate import pause
from app.engine.logs import EngineLogs, LogTarget
from app.logs.errors import engine_problems
from app.logs.page import Collector, Selection
from app.logs.params import LogQuery

ONE_SHOT_DEADLINE = 10.0
PARALLEL = 8
PAUSE_EVERY = 500          # lines handled on the hub between two turns of the event loop


def read_once(engine: EngineLogs, targets: Sequence[LogTarget], query: LogQuery,
              deadline: float = ONE_SHOT_DEADLINE) -> Selection:
    collector = Collector(query)
    failures: list[BaseException] = []

    def read(target: LogTarget) -> None:
        try:
            reader = engine.open(target, follow=False, since_ns=query.start, tail=query.engine_tail,
                                 stream=query.stream)
        except Exception as exc:   # reported below, after every greenlet has ended
            failures.append(exc)
            return
        try:
            handled = 0
            for batch in reader.batches():
                collector.add(batch)
                handled += len(batch)
                if handled >= PAUSE_EVERY:
                    handled = 0
                    pause()
        except Exception as exc:
            failures.append(exc)
        finally:
            reader.close()

    pool = Pool(PARALLEL)
    greenlets = [pool.spawn(read, target) for target in targets]
    try:
        gevent.joinall(greenlets, timeout=deadline)
    finally:
        pool.kill(block=True, timeout=2)
    if failures and (len(failures) >= len(targets) or not collector.lines):
        # every stream failed (or nothing came at all): a problem; one stack service failing among others
        # that answered gives the others' lines
        with engine_problems(live=False):
            raise failures[0]
    return collector.selection()
