"""Verified OIDC claims → :class:`Identity`: subject, display name, email, groups and provider grants.

Pure functions, shared by the session login (ID token claims at the callback) and bearer tokens. Only a
small, fixed set of claims is kept as ``raw`` (no nonce, hashes or token material), so the identity stays
small enough for a cookie and safe to show at ``/auth/whoami``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.acl.policy import parse_provider_grants
from app.auth.identity import Identity, ProviderGrant

PROVIDER = "oidc"
RAW_CLAIMS = ("iss", "sub", "name", "preferred_username", "email", "email_verified")
MAX_GROUPS = 200          # a cookie holds about 4 KB: bound what one claim can add
MAX_GRANTS = 50
MAX_TEXT = 256


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) and value else None


def _strings(value: object, limit: int) -> tuple[str, ...] | None:
    """A list of non-empty strings (bounded), or None when the value is not one."""
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(dict.fromkeys(item[:MAX_TEXT] for item in value if item))[:limit]


def groups_of(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``groups`` claim: a list of strings, or one comma-separated string; anything else is no group."""
    value = claims.get("groups")
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    return _strings(value, MAX_GROUPS) or ()


def grants_of(claims: Mapping[str, Any], claim: str | None) -> tuple[ProviderGrant, ...]:
    """Provider grants (docs/acl.md) from ``claim``: a JSON array of ``{resources, permissions}`` (a JSON
    value, or a string holding JSON), decoded by the policy's own grammar (invalid entries dropped); at
    most :data:`MAX_GRANTS` kept, so the session cookie stays small."""
    if not claim or claim not in claims:
        return ()
    value = claims[claim]
    if isinstance(value, list):
        value = value[:MAX_GRANTS]
    return parse_provider_grants(value)[:MAX_GRANTS]


def identity_from_claims(claims: Mapping[str, Any], grant_claim: str | None) -> Identity:
    """The Identity of verified claims (``sub`` is required and checked by the verifier)."""
    subject = str(claims["sub"])[:MAX_TEXT]
    email = _text(claims.get("email"))
    name = (_text(claims.get("name")) or _text(claims.get("preferred_username")) or email or subject)
    raw = {key: claims[key] for key in RAW_CLAIMS if key in claims and isinstance(claims[key], str | bool)}
    return Identity(subject=subject, display_name=name, provider=PROVIDER, email=email,
                    groups=groups_of(claims), raw=raw, grants=grants_of(claims, grant_claim))


def identity_to_dict(identity: Identity) -> dict[str, Any]:
    """The session cookie's payload: the identity only (never a token)."""
    return {"sub": identity.subject, "name": identity.display_name, "email": identity.email,
            "groups": list(identity.groups), "raw": dict(identity.raw or {}),
            "grants": [[list(g.resources), sorted(g.permissions)] for g in identity.grants]}


def identity_from_dict(data: Mapping[str, Any]) -> Identity:
    """The inverse of :func:`identity_to_dict` (a verified cookie; a malformed one raises ValueError)."""
    try:
        subject, name = data["sub"], data["name"]
        if not isinstance(subject, str) or not isinstance(name, str) or not subject:
            raise ValueError("subject")
        email = data.get("email")
        groups = _strings(data.get("groups", []), MAX_GROUPS)
        raw = data.get("raw") or {}
        grants = tuple(ProviderGrant(tuple(resources), frozenset(permissions))
                       for resources, permissions in data.get("grants", []))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError("malformed session payload") from exc
    if groups is None or not isinstance(raw, dict) or not (email is None or isinstance(email, str)):
        raise ValueError("malformed session payload")
    return Identity(subject=subject, display_name=name, provider=PROVIDER, email=email, groups=groups,
                    raw=raw, grants=grants)
