"""The authorization policy model (docs/acl.md, Format): grants of (resources, audience, permissions).

Grants only add: every grant that matches an identity is unioned, there are no deny rules. A resource is
``<type>:<glob>`` or ``*``; globs are path-style (``*``, ``?``, ``[...]``, matched against the whole name).
An audience is ``user:<glob>`` (subject or email), ``group:<glob>`` (any group) or ``*``; an omitted audience
means everyone. ``write`` implies ``read``. :func:`parse_policy` validates a decoded document and refuses
the whole policy on the first bad element, naming it (start-up fails, a reload keeps the old policy).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.auth.identity import Identity, ProviderGrant

RESOURCE_TYPES = frozenset({"service", "stack", "node", "task", "config", "secret", "network", "volume", "plugin",
                            "swarm", "*"})
PERMISSIONS = frozenset({"read", "write"})


class PolicyError(ValueError):
    """The policy is invalid; the message names the element."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    type: str        # one of RESOURCE_TYPES; "*" matches every type
    glob: str

    def regex(self) -> str:
        return fnmatch.translate(self.glob)


@dataclass(frozen=True, slots=True)
class Audience:
    kind: str        # user, group, *
    glob: str

    def matches(self, identity: Identity) -> bool:
        if self.kind == "*":
            return True
        if self.kind == "group":
            return any(fnmatch.fnmatchcase(group, self.glob) for group in identity.groups)
        candidates = [identity.subject] + ([identity.email] if identity.email else [])
        return any(fnmatch.fnmatchcase(value, self.glob) for value in candidates)


@dataclass(frozen=True, slots=True)
class Grant:
    resources: tuple[ResourcePattern, ...]
    audience: tuple[Audience, ...]          # empty: everyone
    permissions: frozenset[str]             # normalised: write brings read

    def applies_to(self, identity: Identity) -> bool:
        return not self.audience or any(a.matches(identity) for a in self.audience)


@dataclass(frozen=True, slots=True)
class Policy:
    grants: tuple[Grant, ...]
    source: str = "inline"


def parse_resource(text: Any, where: str) -> ResourcePattern:
    if not isinstance(text, str) or not text.strip():
        raise PolicyError(f"{where}: a resource is a non-empty string like service:web-*")
    value = text.strip()
    if value == "*":
        return ResourcePattern("*", "*")
    kind, sep, glob = value.partition(":")
    if not sep or not glob:
        raise PolicyError(f"{where}: {value!r} is not <type>:<glob> or *")
    if kind not in RESOURCE_TYPES:
        raise PolicyError(f"{where}: unknown resource type {kind!r} (use {', '.join(sorted(RESOURCE_TYPES))})")
    _check_glob(glob, where)
    return ResourcePattern(kind, glob)


def parse_audience(text: Any, where: str) -> Audience:
    if not isinstance(text, str) or not text.strip():
        raise PolicyError(f"{where}: an audience is user:<glob>, group:<glob> or *")
    value = text.strip()
    if value == "*":
        return Audience("*", "*")
    kind, sep, glob = value.partition(":")
    if kind not in ("user", "group") or not sep or not glob:
        raise PolicyError(f"{where}: {value!r} is not user:<glob>, group:<glob> or *")
    _check_glob(glob, where)
    return Audience(kind, glob)


def parse_permissions(values: Any, where: str) -> frozenset[str]:
    if not isinstance(values, list) or not values:
        raise PolicyError(f"{where}: permissions is a non-empty list of read, write")
    found = set()
    for value in values:
        if value not in PERMISSIONS:
            raise PolicyError(f"{where}: unknown permission {value!r} (use read, write)")
        found.add(value)
    if "write" in found:
        found.add("read")
    return frozenset(found)


def _check_glob(glob: str, where: str) -> None:
    if glob.count("[") != glob.count("]"):
        raise PolicyError(f"{where}: bad glob {glob!r} (unbalanced brackets)")
    try:
        re.compile(fnmatch.translate(glob))
    except re.error as exc:
        raise PolicyError(f"{where}: bad glob {glob!r} ({exc})") from None


def parse_policy(document: Any, source: str = "inline") -> Policy:
    """``{"grants": [{"resources": [...], "audience": [...], "permissions": [...]}]}`` → Policy."""
    if not isinstance(document, dict) or not isinstance(document.get("grants"), list):
        raise PolicyError(f"{source}: a policy is an object with a grants list")
    grants = []
    for index, raw in enumerate(document["grants"]):
        where = f"{source}: grants[{index}]"
        if not isinstance(raw, dict):
            raise PolicyError(f"{where}: a grant is an object")
        resources = raw.get("resources")
        if not isinstance(resources, list) or not resources:
            raise PolicyError(f"{where}: resources is a non-empty list")
        audience = raw.get("audience", [])
        if audience in (None, "*"):
            audience = []
        if not isinstance(audience, list):
            raise PolicyError(f"{where}: audience is a list")
        parsed = tuple(parse_audience(a, f"{where}.audience") for a in audience)
        everyone = any(a.kind == "*" for a in parsed)
        grants.append(Grant(tuple(parse_resource(r, f"{where}.resources") for r in resources),
                            () if everyone else parsed,
                            parse_permissions(raw.get("permissions"), f"{where}.permissions")))
    return Policy(tuple(grants), source)


def provider_grants(values: Iterable[ProviderGrant]) -> tuple[Grant, ...]:
    """Provider grants as audience-less policy grants (for this identity only); invalid ones dropped."""
    grants = []
    for value in values:
        try:
            resources = tuple(parse_resource(r, "provider grant") for r in value.resources)
            permissions = parse_permissions(sorted(value.permissions), "provider grant")
        except PolicyError:
            continue
        if resources:
            grants.append(Grant(resources, (), permissions))
    return tuple(grants)


def parse_provider_grants(value: Any) -> tuple[ProviderGrant, ...]:
    """Per-user grants a provider supplies (docs/acl.md): a JSON array, as text (a proxy header, a claim
    holding a string) or already decoded (an OIDC claim), of ``{"resources": [...], "permissions": [...]}``.
    Invalid entries are dropped one by one (a bad resource or permission drops its whole entry); anything
    that is not an array gives no grants. Never raises."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return ()
    if not isinstance(value, list):
        return ()
    found = []
    for raw in value:
        if not isinstance(raw, dict):
            continue
        resources, permissions = raw.get("resources"), raw.get("permissions")
        if not isinstance(resources, list) or not resources:
            continue
        try:
            parsed = tuple(parse_resource(r, "provider grant") for r in resources)
            allowed = parse_permissions(permissions, "provider grant")
        except PolicyError:
            continue
        texts = tuple("*" if r.type == "*" and r.glob == "*" else f"{r.type}:{r.glob}" for r in parsed)
        found.append(ProviderGrant(texts, allowed))
    return tuple(found)
