"""The registered-client store (memory and SQLite) and the registry that D2's endpoints look clients up in:
LRU eviction at the cap, last-use written at most once a minute, a restart keeping registrations, and
https client_ids routed to the metadata-document fetcher."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.oauth.clients import TOUCH_EVERY, OAuthClient, Registry, UnknownClient
from app.oauth.metadata_documents import DocumentFetcher
from app.store.oauth_clients import ClientStore, MemoryClients, SqliteClients, StoredClient


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stored(client_id: str, used: float) -> StoredClient:
    return StoredClient(client_id, f"name {client_id}", ("https://app.example/cb",), ("authorization_code",),
                        ("code",), issued_at=used, last_used=used)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ClientStore:
    made: ClientStore = MemoryClients() if request.param == "memory" else SqliteClients(str(tmp_path / "shoal.db"))
    request.addfinalizer(made.close)
    return made


def test_a_stored_client_reads_back(store: ClientStore) -> None:
    assert store.add(stored("a", 10.0), max_clients=5) == ()
    assert store.get("a") == stored("a", 10.0)
    assert store.get("missing") is None


def test_the_least_recently_used_is_evicted_at_the_cap(store: ClientStore) -> None:
    for number, client_id in enumerate("abc"):
        store.add(stored(client_id, 10.0 + number), max_clients=3)
    store.touch("a", 20.0)                                     # a is now the most recent; b the least
    assert store.add(stored("d", 21.0), max_clients=3) == ("b",)
    assert store.get("b") is None and store.count() == 3
    assert {c for c in "acd" if store.get(c) is not None} == {"a", "c", "d"}


def test_sqlite_registrations_survive_a_new_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "shoal.db")
    first = SqliteClients(path)
    first.add(stored("kept", 5.0), max_clients=10)
    first.close()
    again = SqliteClients(path)
    try:
        assert again.get("kept") == stored("kept", 5.0)
    finally:
        again.close()
    with sqlite3.connect(path) as db:   # the table is in the state store's file, under its own name
        assert db.execute("SELECT client_id FROM oauth_clients").fetchall() == [("kept",)]


def registry(store: ClientStore, clock: Clock, max_clients: int = 3) -> Registry:
    return Registry(max_clients=max_clients, documents=None, open_store=lambda: store, clock=clock)


def test_a_registered_client_is_looked_up_as_self_reported(store: ClientStore) -> None:
    clients = registry(store, Clock())
    made = clients.register(client_name="CLI", redirect_uris=("http://127.0.0.1:9/cb",),
                            grant_types=("authorization_code", "refresh_token"), response_types=("code",))
    assert len(made.client_id) >= 32
    assert clients.lookup(made.client_id) == OAuthClient(made.client_id, "CLI", ("http://127.0.0.1:9/cb",),
                                                         verified=False)


def test_an_unknown_client_id_says_why(store: ClientStore) -> None:
    with pytest.raises(UnknownClient, match="not registered here"):
        registry(store, Clock()).lookup("no-such-client")
    with pytest.raises(UnknownClient, match="no valid client_id"):
        registry(store, Clock()).lookup("")


def test_lookup_marks_use_at_most_once_a_minute(store: ClientStore) -> None:
    """Lookups within a minute write nothing; the first one after it moves the client to the recent end,
    which then decides the eviction."""
    clock = Clock()
    clients = registry(store, clock, max_clients=2)
    first = clients.register(client_name=None, redirect_uris=("https://a.example/cb",),
                             grant_types=("authorization_code",), response_types=("code",))
    clock.now += 1
    second = clients.register(client_name=None, redirect_uris=("https://b.example/cb",),
                              grant_types=("authorization_code",), response_types=("code",))
    clock.now += TOUCH_EVERY / 2
    clients.lookup(first.client_id)
    stamp = store.get(first.client_id)
    assert stamp is not None and stamp.last_used == first.last_used      # too soon: not written
    clock.now += TOUCH_EVERY
    clients.lookup(first.client_id)
    stamp = store.get(first.client_id)
    assert stamp is not None and stamp.last_used == clock.now
    clients.register(client_name=None, redirect_uris=("https://c.example/cb",),
                     grant_types=("authorization_code",), response_types=("code",))
    assert store.get(second.client_id) is None                         # least recently used: evicted
    assert clients.lookup(first.client_id).client_id == first.client_id


def test_https_client_ids_need_metadata_documents_on() -> None:
    with pytest.raises(UnknownClient, match="does not accept client-metadata documents"):
        registry(MemoryClients(), Clock()).lookup("https://app.example.com/client.json")


def test_https_client_ids_go_to_the_document_fetcher() -> None:
    """With documents on, an https client_id is fetched (here refused by the default address policy before
    any connection), never looked up among the registrations."""
    fetch = DocumentFetcher()
    clients = Registry(max_clients=3, documents=fetch, open_store=MemoryClients, clock=Clock())
    with pytest.raises(UnknownClient, match="loopback"):
        clients.lookup("https://127.0.0.1:9/client.json")
    assert fetch.fetches == 1
