"""Verification of the provider's JWTs (ID tokens at the login callback, bearer ID/access tokens).

Checks, in order: compact JWS shape and size, an asymmetric algorithm (never ``none`` or HMAC, which a
public JWKS would turn into a forgery), the key (a key id missing from the key set triggers one
rate-limited refresh, for key rotation), the signature, then the claims: ``iss`` = the issuer, ``sub``,
``exp`` (and ``nbf``, ``iat``) with :data:`LEEWAY` seconds of clock skew, ``aud`` contains the client id,
a multi-audience token (and any token with ``azp``) has ``azp`` = the client id, and at the callback the
``nonce`` of the login flow. A rejection's reason is safe to show: it never contains the token.
"""

from __future__ import annotations

import base64
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from joserfc import jwt
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError, InvalidKeyIdError, JoseError

from app.auth.oidc_discovery import Discovery

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY = 60
MAX_TOKEN_BYTES = 16 * 1024


class TokenRejected(Exception):
    """The token is not acceptable; ``reason`` is for the client (and the log), without the token."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and len(token) <= MAX_TOKEN_BYTES


def unverified_header(token: str) -> dict[str, Any] | None:
    """A JWT's header before any check (to pick the key and refuse an algorithm); None when unreadable.
    Shared by the OIDC tokens and the agents' access tokens."""
    part = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, TypeError):
        return None
    return header if isinstance(header, dict) else None


def _header(token: str) -> dict[str, Any]:
    if not looks_like_jwt(token):
        raise TokenRejected("the token is not a signed JWT")
    header = unverified_header(token)
    if header is None:
        raise TokenRejected("the token header is not readable")
    return header


class TokenVerifier:
    def __init__(self, discovery: Discovery, client_id: str, *, clock: Callable[[], float] = time.time) -> None:
        self.discovery = discovery
        self.client_id = client_id
        self._clock = clock

    def verify(self, token: str, *, nonce: str | None = None) -> dict[str, Any]:
        """The verified claims of ``token``, or :class:`TokenRejected`. Provider failures (discovery, keys)
        propagate as ``ProviderUnavailable``."""
        header = _header(token)
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise TokenRejected(f"the token's algorithm {str(alg)[:20]!r} is not accepted")
        keys = self.discovery.keys()
        if not any(key.kid == kid for key in keys) and (kid is not None or len(keys.keys) != 1):
            keys = self.discovery.keys(unknown_kid=True)
        try:
            decoded = jwt.decode(token, keys, algorithms=[alg])
        except InvalidKeyIdError:
            raise TokenRejected("the token is signed by a key the provider does not publish") from None
        except BadSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except (JoseError, ValueError, TypeError):
            raise TokenRejected("the token cannot be decoded") from None
        claims = decoded.claims
        self._check_claims(claims)
        if nonce is not None:
            found = claims.get("nonce")
            if not isinstance(found, str) or not hmac.compare_digest(found, nonce):
                raise TokenRejected("the ID token's nonce is not the one of this login")
        return claims

    def _check_claims(self, claims: dict[str, Any]) -> None:
        issuer = str(self.discovery.metadata()["issuer"])
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()), leeway=LEEWAY,
            iss={"essential": True, "value": issuer}, sub={"essential": True}, exp={"essential": True},
            aud={"essential": True})
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenRejected("the token has expired") from None
        except ClaimError as exc:
            raise TokenRejected(f"the token's {exc.claim!r} claim is missing or not valid") from None
        audiences = [claims["aud"]] if isinstance(claims["aud"], str) else list(claims["aud"])
        if self.client_id not in audiences:
            raise TokenRejected("the token is not meant for this service (aud)")
        azp = claims.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != self.client_id:
            raise TokenRejected("the token's authorised party (azp) is not this service")
