"""OAuth clients of the agents' authorization server: registered (RFC 7591) or named by a client-metadata
document URL. Contract between registration/metadata-document fetching and the authorize/token endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
