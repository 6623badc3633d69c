"""Registered OAuth clients (dynamic registration at ``/oauth/register``): kept across restarts, at most
``mcp.oauth.dcr_max_clients`` of them, the least recently used evicted first.

Two backends with one interface (:class:`ClientStore`), as the ``Idempotency-Key`` records have:

- :class:`SqliteClients` — the table ``oauth_clients`` in the state store's file (``<data_dir>/shoal.db``),
  through a connection of its own, created with ``CREATE TABLE IF NOT EXISTS`` once the persister has made
  the file. Every call runs on a one-thread gevent ``ThreadPool``, so the hub only waits. A registration is
  committed with ``synchronous=FULL`` before the call returns (the ``client_id`` handed out survives a
  ``kill -9`` and a power cut); a last-used mark with ``NORMAL`` (the WAL only: it is a hint for eviction).
- :class:`MemoryClients` — an ordered map when persistence is off: registrations then end with the process.

Marking a client used is the caller's business to throttle (``app.oauth.clients`` does it at most once a
minute per client), so the file is not written on every authorize request.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from app.store.side_table import SideTable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoredClient:
    """One registration as it was accepted (all values already checked)."""

    client_id: str
    client_name: str | None
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    response_types: tuple[str, ...]
    issued_at: float
    last_used: float


class ClientStore(Protocol):
    def get(self, client_id: str) -> StoredClient | None: ...
    def add(self, client: StoredClient, max_clients: int) -> tuple[str, ...]:
        """Store ``client``, then evict the least recently used beyond ``max_clients``; the evicted ids."""
        ...
    def touch(self, client_id: str, when: float) -> None: ...
    def count(self) -> int: ...
    def close(self) -> None: ...


class MemoryClients:
    """The in-process store (persistence off): ordered by last use, the least recent first."""

    def __init__(self) -> None:
        self._clients: OrderedDict[str, StoredClient] = OrderedDict()

    def get(self, client_id: str) -> StoredClient | None:
        return self._clients.get(client_id)

    def add(self, client: StoredClient, max_clients: int) -> tuple[str, ...]:
        self._clients.pop(client.client_id, None)
        self._clients[client.client_id] = client
        evicted: list[str] = []
        while len(self._clients) > max(1, max_clients):
            evicted.append(self._clients.popitem(last=False)[0])
        return tuple(evicted)

    def touch(self, client_id: str, when: float) -> None:
        client = self._clients.get(client_id)
        if client is not None:
            self._clients[client_id] = replace(client, last_used=when)
            self._clients.move_to_end(client_id)

    def count(self) -> int:
        return len(self._clients)

    def close(self) -> None:
        self._clients.clear()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS oauth_clients (
    client_id TEXT PRIMARY KEY, client_name TEXT, redirect_uris TEXT NOT NULL, grant_types TEXT NOT NULL,
    response_types TEXT NOT NULL, issued_at REAL NOT NULL, last_used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS oauth_clients_last_used ON oauth_clients (last_used);
"""
_COLUMNS = "client_id, client_name, redirect_uris, grant_types, response_types, issued_at, last_used"


class SqliteClients(SideTable):
    """The durable store: one connection, one thread, a registration committed before the call returns."""

    def __init__(self, path: str) -> None:
        super().__init__(path, _SCHEMA)

    def get(self, client_id: str) -> StoredClient | None:
        def read(db: sqlite3.Connection) -> StoredClient | None:
            row = db.execute(f"SELECT {_COLUMNS} FROM oauth_clients WHERE client_id = ?", (client_id,)).fetchone()
            return None if row is None else _client(row)
        return self._run(read)

    def add(self, client: StoredClient, max_clients: int) -> tuple[str, ...]:
        def write(db: sqlite3.Connection) -> tuple[str, ...]:
            db.execute("PRAGMA synchronous = FULL")
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(f"INSERT OR REPLACE INTO oauth_clients ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           _row(client))
                (count,) = db.execute("SELECT COUNT(*) FROM oauth_clients").fetchone()
                excess = count - max(1, max_clients)
                evicted: tuple[str, ...] = ()
                if excess > 0:
                    evicted = tuple(row[0] for row in db.execute(
                        "SELECT client_id FROM oauth_clients WHERE client_id != ? ORDER BY last_used, issued_at "
                        "LIMIT ?", (client.client_id, excess)))
                    db.executemany("DELETE FROM oauth_clients WHERE client_id = ?", [(cid,) for cid in evicted])
                db.execute("COMMIT")
                return evicted
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return self._run(write)

    def touch(self, client_id: str, when: float) -> None:
        def write(db: sqlite3.Connection) -> None:
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("UPDATE oauth_clients SET last_used = ? WHERE client_id = ?", (when, client_id))
        self._run(write)

    def count(self) -> int:
        def read(db: sqlite3.Connection) -> int:
            (count,) = db.execute("SELECT COUNT(*) FROM oauth_clients").fetchone()
            return int(count)
        return self._run(read)



def _row(client: StoredClient) -> tuple[Any, ...]:
    return (client.client_id, client.client_name, json.dumps(client.redirect_uris), json.dumps(client.grant_types),
            json.dumps(client.response_types), client.issued_at, client.last_used)


def _client(row: tuple[Any, ...]) -> StoredClient:
    client_id, name, redirect_uris, grant_types, response_types, issued_at, last_used = row
    return StoredClient(str(client_id), None if name is None else str(name),
                        _strings(redirect_uris), _strings(grant_types), _strings(response_types),
                        float(issued_at), float(last_used))


def _strings(text: str) -> tuple[str, ...]:
    return tuple(str(value) for value in json.loads(text))
