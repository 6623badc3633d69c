"""Version-1 schemas of ``/auth/whoami`` and ``/profile`` (docs/auth.md, docs/acl.md)."""

from __future__ import annotations

from marshmallow import fields

from app.schemas.v1.envelopes import JsonLdV1

_PERMISSIONS = fields.Dict(
    keys=fields.String(), values=fields.List(fields.String()),
    metadata={"description": "the caller's effective grants: resource pattern → permissions (read, write); "
                             "absent when no ACL policy is active (everything is allowed)",
              "example": {"stack:demo": ["read"], "service:demo_web": ["read", "write"]}})


class IdentityV1(JsonLdV1):
    subject = fields.String(required=True, metadata={"example": "alice"})
    displayName = fields.String(required=True, metadata={"example": "Alice"})
    email = fields.String(metadata={"description": "when the provider gives one"})
    groups = fields.List(fields.String(), metadata={"description": "when the provider gives any"})
    provider = fields.String(required=True, metadata={"enum": ["none", "oidc", "tailscale", "cert", "headers"]})
    raw = fields.Dict(metadata={"description": "the provider's claims / subject DN (never a credential)"})
    permissions = _PERMISSIONS


class ProfileV1(IdentityV1):
    pass
