"""The authorization server's per-app state: issuer, signing key, code store, grant store, client registry.

Made by ``init_oauth`` at app creation without I/O; the grant store and a generated signing key are made on
first use, inside the worker, once the state store's file is open (as ``app.http.idempotency`` does).

Signing key: ``mcp.signing_key`` when set; else one generated once (32 random bytes) and kept in the state
store, so a restart keeps agents logged in (their access tokens still verify, their refresh tokens still
work); in memory only when persistence is off. It is never logged.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field

from flask import Flask, current_app

from app.config import Settings
from app.oauth.clients import ClientRegistry, OAuthClient
from app.oauth.codes import CodeStore
from app.oauth.issuer import Issuer, issuer_of
from app.oauth.tokens import AccessTokens
from app.runtime import runtime_of
from app.store.oauth_grants import GrantStore, MemoryGrants, SqliteGrants

log = logging.getLogger(__name__)
_KEY = "shoal.oauth"


@dataclass
class OAuthServer:
    app: Flask
    settings: Settings
    issuer: Issuer
    codes: CodeStore = field(default_factory=CodeStore)
    registry: ClientRegistry | None = None      # None: app.oauth.clients.client_registry(app)
    _grants: GrantStore | None = None
    _key: bytes | None = field(default=None, repr=False)
    _tokens: AccessTokens | None = field(default=None, repr=False)

    def grants(self) -> GrantStore:
        if self._grants is None:
            store = runtime_of(self.app).store
            if store is not None and store.active:
                self._grants = SqliteGrants(store.path)
            else:
                if self.settings.persistence:
                    log.warning("the state store is not open: OAuth grants (and a generated signing key) are "
                                "kept in memory and end with this process")
                self._grants = MemoryGrants()
        return self._grants

    def key(self) -> bytes:
        if self._key is None:
            configured = self.settings.mcp_signing_key
            self._key = configured if configured else self.grants().signing_key(lambda: secrets.token_bytes(32))
        return self._key

    def access_tokens(self) -> AccessTokens:
        if self._tokens is None:
            self._tokens = AccessTokens(self.key(), self.issuer.url, self.issuer.resource,
                                        self.settings.mcp_access_token_ttl)
        return self._tokens

    def lookup_client(self, client_id: str) -> OAuthClient:
        """The client, or ``app.oauth.clients.UnknownClient`` (may fetch a metadata document)."""
        registry = self.registry
        if registry is None:
            from app.oauth.clients import client_registry

            registry = client_registry(self.app)
        assert registry is not None
        return registry.lookup(client_id)

    def close(self) -> None:
        if self._grants is not None:
            self._grants.close()
            self._grants = None


def make_server(app: Flask) -> OAuthServer:
    settings = runtime_of(app).settings
    server = OAuthServer(app, settings, issuer_of(settings))
    app.extensions[_KEY] = server
    return server


def server_of(app: Flask) -> OAuthServer:
    server = app.extensions[_KEY]
    assert isinstance(server, OAuthServer)
    return server


def current_server() -> OAuthServer:
    return server_of(current_app)


def maybe_server(app: Flask) -> OAuthServer | None:
    """The app's authorization server, None when it runs none (auth mode none, or the endpoint is off)."""
    server = app.extensions.get(_KEY)
    return server if isinstance(server, OAuthServer) else None
