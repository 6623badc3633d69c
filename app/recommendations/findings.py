"""Findings: what a check reports about one resource, and how a finding is identified and serialised.

A finding's id is ``<check>:<resourceType>:<resourceId>``: the same problem on the same object keeps its id
across evaluations, so its ``firstSeen`` survives re-evaluation and a client (SSE, Atom) can tell a new
finding from one it already saw. ``seq`` numbers appearances (the feeds' ``before`` cursor).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SEVERITIES = ("critical", "warning", "info")          # most severe first
SEVERITY_ORDER = {name: index for index, name in enumerate(SEVERITIES)}
RESOURCE_TYPES = ("service", "node", "config", "secret", "network", "volume", "cluster")
SCOPES = ("service", "node", "cluster")
CLUSTER_ID = "swarm"     # resource id of cluster-wide findings


@dataclass(slots=True)
class Finding:
    """Made by a check; the store sets ``first_seen`` and ``seq`` once, then nothing changes it."""

    check: str
    severity: str
    resource_type: str
    resource_id: str
    resource_name: str
    message: str
    fix: str
    fix_action: str | None = None
    resource: str | None = None           # limit checks: cpu, memory or cpu+memory
    mentions: tuple[str, ...] = ()        # ids of services the message names (ACL: each must be readable)
    first_seen: float = 0.0               # set by the store
    seq: int = 0                          # set by the store

    @property
    def id(self) -> str:
        return f"{self.check}:{self.resource_type}:{self.resource_id}"

    @property
    def scope(self) -> str:
        return self.resource_type if self.resource_type in ("service", "node") else "cluster"

    def same_report(self, other: Finding) -> bool:
        """Whether two evaluations said the same thing (ignoring when it was first seen)."""
        return (self.severity, self.resource_name, self.message, self.fix, self.fix_action, self.resource) == (
            other.severity, other.resource_name, other.message, other.fix, other.fix_action, other.resource)

    def link(self, base: str) -> str | None:
        if self.resource_type == "cluster":
            return None
        plural = "volumes" if self.resource_type == "volume" else self.resource_type + "s"
        return f"{base}/{plural}/{self.resource_id}"

    def to_json(self, base: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id, "check": self.check, "category": self.check, "severity": self.severity,
            "scope": self.scope, "resourceType": self.resource_type, "resourceId": self.resource_id,
            "resourceName": self.resource_name, "targetId": self.resource_id, "targetName": self.resource_name,
            "link": self.link(base), "message": self.message, "fix": self.fix,
        }
        if self.resource is not None:
            data["resource"] = self.resource
        if self.fix_action is not None:
            data["fixAction"] = self.fix_action
        data["firstSeen"] = iso(self.first_seen)
        data["seq"] = self.seq
        return data


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sort_key(finding: Finding) -> tuple[int, str, str, str]:
    """Most severe first, then by check and resource name (a stable order for lists and paging)."""
    return SEVERITY_ORDER[finding.severity], finding.check, finding.resource_name, finding.resource_id
