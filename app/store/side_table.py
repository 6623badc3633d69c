"""A table of its own in the state store's file, beside the persister's: the ``Idempotency-Key`` records and
the agents' OAuth clients and grants.

Why a base: each such table has its own connection (the persister owns its own and its schema), opened on
first use with its ``CREATE TABLE IF NOT EXISTS`` schema, and every call runs on a one-thread gevent
``ThreadPool``, so the hub only waits while SQLite works; ``synchronous=FULL`` by default, so a change
committed before an answer survives a ``kill -9`` and a power cut.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from gevent.threadpool import ThreadPool

T = TypeVar("T")


class SideTable:
    def __init__(self, path: str, schema: str) -> None:
        self._path = path
        self._schema = schema
        self._pool = ThreadPool(1)
        self._db: sqlite3.Connection | None = None

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def job() -> T:
            if self._db is None:
                self._db = self._open()
            return work(self._db)
        result: T = self._pool.apply(job)
        return result

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, timeout=5.0, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute("PRAGMA synchronous = FULL")
        db.executescript(self._schema)
        return db

    def close(self) -> None:
        def shut(db: sqlite3.Connection) -> None:
            db.close()
        if self._db is not None:
            self._run(shut)
            self._db = None
        self._pool.kill()
