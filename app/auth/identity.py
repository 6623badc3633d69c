"""The Identity every authentication mode produces, and the failures a provider raises.

Providers differ in where the identity comes from (a trusted proxy's headers, an OIDC session or token, a
client certificate); everything after authentication (the ACL evaluator, ``/auth/whoami``, the audit of
writes) sees only this shape. Tokens and cookies are never part of it, so logging an Identity cannot leak
a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ProviderGrant:
    """A per-user grant a provider supplies (an OIDC claim, a proxy header): audience-less, unioned with
    the policy's grants for this identity only (docs/acl.md, Provider grants)."""

    resources: tuple[str, ...]
    permissions: frozenset[str]


@dataclass(frozen=True, slots=True)
class Identity:
    subject: str
    display_name: str
    provider: str                                  # none, headers, oidc, cert
    email: str | None = None
    groups: tuple[str, ...] = ()
    raw: Mapping[str, Any] | None = field(default=None, compare=False)   # claims / subject DN, no secrets
    grants: tuple[ProviderGrant, ...] = ()
    anonymous: bool = False

    def document(self) -> dict[str, Any]:
        """The ``Identity`` members of ``/auth/whoami`` (docs/auth.md), without the JSON-LD envelope."""
        body: dict[str, Any] = {"subject": self.subject, "displayName": self.display_name,
                                "provider": self.provider}
        if self.email:
            body["email"] = self.email
        if self.groups:
            body["groups"] = list(self.groups)
        if self.raw:
            body["raw"] = dict(self.raw)
        return body


ANONYMOUS = Identity("anonymous", "Anonymous", "none", anonymous=True)


class AuthenticationFailed(Exception):
    """No valid credentials: 401 ``AUT001`` with ``challenge`` as ``WWW-Authenticate`` (when the mode has
    one). ``detail`` is shown to the client: never put a credential in it."""

    def __init__(self, detail: str, challenge: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.challenge = challenge


class ProviderRefused(Exception):
    """The identity provider itself refused or failed (403 ``AUT002``)."""


class LoginRequired(Exception):
    """A browser without a session (OIDC): answered with a redirect to ``location`` instead of a 401."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location
