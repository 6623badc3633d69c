"""OAuth clients of the agents' authorization server: registered (RFC 7591) or named by a client-metadata
document URL. Contract between registration/metadata-document fetching and the authorize/token endpoints."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from flask import Flask

from app.store.oauth_clients import ClientStore, MemoryClients, SqliteClients, StoredClient

if TYPE_CHECKING:
    from app.oauth.metadata_documents import DocumentFetcher

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OAuthClient:
    client_id: str
    client_name: str | None
    redirect_uris: tuple[str, ...]
    verified: bool                 # True: a client-metadata document (https client_id); False: self-reported
    token_endpoint_auth_method: str = "none"
    grant_types: tuple[str, ...] = ("authorization_code", "refresh_token")


class UnknownClient(Exception):
    """No such client, or its metadata document could not be used; ``str()`` says why (shown to the human
    on the authorize error page; never contains a secret)."""


class ClientRegistry(Protocol):
    def lookup(self, client_id: str) -> OAuthClient:
        """The client (a registered one is marked used for LRU eviction; a document URL is fetched or taken
        from its 1 h cache); :class:`UnknownClient` otherwise. May do network I/O (gevent-cooperative)."""
        ...


# ---------------------------------------------------------------------------------------------- the registry
REGISTRY_KEY = "shoal.oauth.clients"   # app.extensions: the app's Registry
TOUCH_EVERY = 60.0   # seconds: a registered client's last use is written at most this often
MAX_CLIENT_ID = 2000


class Registry:
    """The app's clients: registered ones in the state store (least recently used evicted beyond the cap),
    metadata-document ones fetched (:class:`app.oauth.metadata_documents.DocumentFetcher`).

    The store is opened on first use (inside the worker, after the state store has started): the state
    store's file when persistence is on and that file is open, else memory."""

    def __init__(self, *, max_clients: int, documents: DocumentFetcher | None,
                 open_store: Callable[[], ClientStore], clock: Callable[[], float] = time.time) -> None:
        self.max_clients = max_clients
        self.documents = documents            # None: metadata-document client_ids are turned off
        self._open_store = open_store
        self._store: ClientStore | None = None
        self._clock = clock

    @property
    def store(self) -> ClientStore:
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def lookup(self, client_id: str) -> OAuthClient:
        if not client_id or len(client_id) > MAX_CLIENT_ID:
            raise UnknownClient("the request names no valid client_id")
        if client_id[:8].lower() == "https://":
            if self.documents is None:
                raise UnknownClient("this service does not accept client-metadata documents (an https "
                                    "client_id); register the client instead")
            return self.documents.client(client_id)
        stored = self.store.get(client_id)
        if stored is None:
            raise UnknownClient(f"the client_id {client_id[:80]!r} is not registered here (it may have been "
                                "removed as the least recently used); the application should register again")
        now = self._clock()
        if now - stored.last_used >= TOUCH_EVERY:
            self.store.touch(client_id, now)
        return OAuthClient(client_id=stored.client_id, client_name=stored.client_name,
                           redirect_uris=stored.redirect_uris, verified=False, token_endpoint_auth_method="none",
                           grant_types=stored.grant_types)

    def register(self, *, client_name: str | None, redirect_uris: tuple[str, ...], grant_types: tuple[str, ...],
                 response_types: tuple[str, ...]) -> StoredClient:
        """A new public client with a generated id, committed before it is returned."""
        now = self._clock()
        client = StoredClient(client_id=secrets.token_urlsafe(24), client_name=client_name,
                              redirect_uris=redirect_uris, grant_types=grant_types, response_types=response_types,
                              issued_at=now, last_used=now)
        evicted = self.store.add(client, self.max_clients)
        if evicted:
            log.info("oauth clients evicted (least recently used)",
                     extra={"evicted": len(evicted), "max_clients": self.max_clients})
        return client

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def client_registry(app: Flask) -> Registry:
    """The app's client registry (a :class:`ClientRegistry`), made on first call without any I/O."""
    registry = app.extensions.get(REGISTRY_KEY)
    if registry is None:
        from app.oauth.metadata_documents import DocumentFetcher
        from app.runtime import runtime_of

        runtime = runtime_of(app)
        settings = runtime.settings

        def open_store() -> ClientStore:
            if runtime.store is not None and runtime.store.active:
                return SqliteClients(runtime.store.path)
            return MemoryClients()

        registry = app.extensions[REGISTRY_KEY] = Registry(
            max_clients=settings.mcp_dcr_max_clients,
            documents=DocumentFetcher() if settings.mcp_cimd_enabled else None, open_store=open_store)
    assert isinstance(registry, Registry)
    return registry


def close_registry(app: Flask) -> None:
    """Close the registry's store connection (tests, or a runtime that ends without the process)."""
    registry = app.extensions.pop(REGISTRY_KEY, None)
    if isinstance(registry, Registry):
        registry.close()
