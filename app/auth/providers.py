"""The provider of each ``auth.mode``: ``authenticate(request) -> Identity`` or ``AuthenticationFailed``.

``app.http.auth`` makes the configured one at app creation (no I/O: an OIDC provider fetches its discovery
document lazily). Mode ``none`` always answers the
anonymous identity, and the ACL is bypassed for it.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from flask import Flask, Request

from app.auth.identity import ANONYMOUS, Identity
from app.config import Settings


class Provider(Protocol):
    mode: str

    def authenticate(self, request: Request) -> Identity: ...

    def init_app(self, app: Flask) -> None:
        """Routes or hooks the mode needs (OIDC login/callback/logout); most modes need none."""


class NoAuth:
    mode = "none"

    def authenticate(self, request: Request) -> Identity:
        return ANONYMOUS

    def init_app(self, app: Flask) -> None:
        return None


# Each mode's module exposes ``make_provider(settings) -> Provider``; imported only when configured, so
# mode none never loads authlib or the TLS pieces.
_MODES = {"headers": "app.auth.headers", "oidc": "app.auth.oidc", "cert": "app.auth.cert"}


def provider_for(settings: Settings) -> Provider:
    if settings.auth_mode == "none":
        return NoAuth()
    module = importlib.import_module(_MODES[settings.auth_mode])
    provider: Provider = module.make_provider(settings)
    return provider
