"""Access tokens (HS256 JWTs) and refresh tokens (opaque, stored hashed) of the agent endpoint.

Access token claims: ``sub``, ``groups``, ``iss`` (the issuer), ``aud`` (the canonical ``/mcp`` URL),
``exp``, ``iat``, ``jti`` and ``client_id`` (the OAuth client it was issued to). Verification checks the
signature with the signing key, then ``iss``, ``aud``, ``exp`` and ``iat`` exactly: a token minted for
another resource or by another issuer is refused even when the key is shared. joserfc (the JOSE library
of authlib's authors, also used for OIDC) signs and verifies; PKCE's S256 is authlib's.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, JoseError
from joserfc.jwk import OctKey

from app.auth.oidc_tokens import unverified_header

MAX_TOKEN_BYTES = 8 * 1024
IAT_SKEW = 60          # seconds an iat may lie in the future (clock steps)
_VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
_CHALLENGE = re.compile(r"[A-Za-z0-9\-_]{43}")   # base64url (no padding) of a SHA-256


class TokenRejected(Exception):
    """The token is not acceptable; ``reason`` goes to the client, never the token itself."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AccessClaims:
    subject: str
    groups: tuple[str, ...]
    client_id: str
    expires: int


class AccessTokens:
    def __init__(self, key: bytes, issuer: str, audience: str, ttl: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._key = OctKey.import_key(key)
        self.issuer, self.audience, self.ttl, self._clock = issuer, audience, int(ttl), clock

    def issue(self, subject: str, groups: tuple[str, ...], client_id: str) -> str:
        now = int(self._clock())
        claims = {"sub": subject, "groups": list(groups), "iss": self.issuer, "aud": self.audience,
                  "exp": now + self.ttl, "iat": now, "jti": secrets.token_urlsafe(16), "client_id": client_id}
        return jwt.encode({"alg": "HS256", "typ": "JWT"}, claims, self._key, algorithms=["HS256"])

    def verify(self, token: str) -> AccessClaims:
        if token.count(".") != 2 or len(token) > MAX_TOKEN_BYTES:
            raise TokenRejected("the token is not a signed JWT")
        if _header(token).get("alg") != "HS256":
            raise TokenRejected("the token's algorithm is not HS256")
        try:
            decoded = jwt.decode(token, self._key, algorithms=["HS256"])
        except BadSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except (JoseError, ValueError, TypeError):
            raise TokenRejected("the token cannot be decoded") from None
        claims = decoded.claims
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()), leeway=0,
            iss={"essential": True, "value": self.issuer}, aud={"essential": True, "value": self.audience},
            sub={"essential": True}, exp={"essential": True}, iat={"essential": True})
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenRejected("the token has expired") from None
        except ClaimError as exc:
            raise TokenRejected(f"the token's {exc.claim!r} claim is missing or not valid") from None
        if claims["iat"] > self._clock() + IAT_SKEW:
            raise TokenRejected("the token's 'iat' claim is in the future")
        groups, client_id = claims.get("groups", []), claims.get("client_id")
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise TokenRejected("the token's 'groups' claim is not a list of strings")
        if not isinstance(client_id, str) or not isinstance(claims["sub"], str):
            raise TokenRejected("the token's 'client_id' or 'sub' claim is missing")
        return AccessClaims(claims["sub"], tuple(groups), client_id, int(claims["exp"]))


def _header(token: str) -> dict[str, Any]:
    header = unverified_header(token)
    if header is None:
        raise TokenRejected("the token header is not readable")
    return header


def new_refresh_token() -> tuple[str, str]:
    """A fresh opaque refresh token and the hash it is stored under."""
    token = secrets.token_urlsafe(32)
    return token, hash_token(token)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def valid_verifier(verifier: str) -> bool:
    """RFC 7636: 43 to 128 unreserved characters."""
    return _VERIFIER.fullmatch(verifier) is not None


def valid_challenge(challenge: str) -> bool:
    return _CHALLENGE.fullmatch(challenge) is not None


def pkce_matches(verifier: str, challenge: str) -> bool:
    return secrets.compare_digest(create_s256_code_challenge(verifier), challenge)
