"""Signed cookies of the OIDC mode: the session (the identity, never a token) and the short-lived login flow
(state, nonce, PKCE verifier, where to go back).

Each value is JSON signed with HMAC-SHA256 under ``auth.oidc.session_key`` (itsdangerous), with a salt per
purpose so a flow cookie can never pass as a session, and carries its own expiry (checked here, not left
to the browser). Attributes: HttpOnly, SameSite=Lax (the provider's redirect back is a top-level GET, which
Lax lets through), Path=/; with TLS the names take the ``__Host-`` prefix and the Secure attribute.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from werkzeug.wrappers import Response

SESSION = "session"
FLOW = "flow"
MAX_COOKIE_BYTES = 3800   # browsers keep at least 4096 bytes per cookie, name and attributes included


class CookieInvalid(Exception):
    """Missing, tampered with, expired or malformed: the reason is safe to show (no value in it)."""


class SignedCookies:
    def __init__(self, key: bytes, *, secure: bool) -> None:
        self.secure = secure
        prefix = "__Host-" if secure else ""
        self.names = {SESSION: f"{prefix}shoal-session", FLOW: f"{prefix}shoal-login"}
        self._serializers = {purpose: URLSafeSerializer(key, salt=f"shoal.oidc.{purpose}",
                                                        signer_kwargs={"digest_method": hashlib.sha256})
                             for purpose in (SESSION, FLOW)}

    def seal(self, purpose: str, payload: dict[str, Any], expires: float) -> str:
        """The signed value of ``payload`` valid until ``expires`` (epoch seconds)."""
        value = self._serializers[purpose].dumps({"p": payload, "exp": int(expires)})
        if len(value) > MAX_COOKIE_BYTES:
            raise ValueError(f"the {purpose} cookie would be {len(value)} bytes (at most {MAX_COOKIE_BYTES})")
        return str(value)

    def open(self, purpose: str, value: str | None, now: float | None = None) -> dict[str, Any]:
        """The payload of a signed value, or :class:`CookieInvalid`."""
        if not value:
            raise CookieInvalid(f"no {purpose} cookie")
        try:
            data = self._serializers[purpose].loads(value)
        except BadSignature:
            raise CookieInvalid(f"the {purpose} cookie is not valid (bad signature or format)") from None
        if not isinstance(data, dict) or not isinstance(data.get("p"), dict) or not isinstance(data.get("exp"), int):
            raise CookieInvalid(f"the {purpose} cookie is malformed")
        if data["exp"] <= (time.time() if now is None else now):
            raise CookieInvalid(f"the {purpose} cookie has expired")
        payload: dict[str, Any] = data["p"]
        return payload

    def read(self, purpose: str, cookies: Any) -> str | None:
        value = cookies.get(self.names[purpose])
        return value if isinstance(value, str) else None

    def set(self, response: Response, purpose: str, value: str, max_age: int) -> None:
        response.set_cookie(self.names[purpose], value, max_age=max(1, max_age), path="/", secure=self.secure,
                            httponly=True, samesite="Lax")

    def clear(self, response: Response, purpose: str) -> None:
        response.delete_cookie(self.names[purpose], path="/", secure=self.secure, httponly=True, samesite="Lax")
