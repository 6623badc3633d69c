"""Shared pieces of the tool and dry-run unit tests (no tests here): an app on the synthetic cluster with a
recording engine writer, and tool calls inside a ``POST /mcp`` request context as a given identity.

Policy users (headers mode): ``ops`` writes ``service:*``; ``reader`` reads ``stack:shop``; ``noder`` writes
``node:*``; ``nobody`` has no grant.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import g

import app.mcp.tools  # noqa: F401  (registers tools/list and tools/call)
from app.auth.identity import ANONYMOUS, Identity
from app.engine.writes import WriteFailure
from app.mcp.registry import METHODS, CallContext
from app.resources import ResourceKind
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

POLICY = {"grants": [
    {"resources": ["service:*"], "audience": ["user:ops"], "permissions": ["write"]},
    {"resources": ["stack:shop"], "audience": ["user:reader"], "permissions": ["read"]},
    {"resources": ["node:*"], "audience": ["user:noder"], "permissions": ["write"]},
]}
ACL_SETTINGS: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User",
                                "trusted_proxies": ("127.0.0.1/32",), "acl_policy": json.dumps(POLICY)}


class RecordingWriter:
    """The engine writer: records every call; updates apply to a copy of the cached object."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.calls: list[tuple[str, Any]] = []
        self.state: dict[tuple[str, str], dict[str, Any] | None] = {}

    def _cached(self, kind: str, object_id: str) -> dict[str, Any]:
        entry = self.harness.cache.get(ResourceKind(kind), object_id)
        if entry is None:
            raise WriteFailure("not_found", f"no {kind} {object_id}")
        return copy.deepcopy(entry.raw)

    def update_spec(self, kind: str, object_id: str, version: int, spec: dict[str, Any], *,
                    rollback: bool = False) -> None:
        self.calls.append(("update", (kind, object_id, version, spec, rollback)))
        raw = self._cached(kind, object_id)
        raw["Spec"] = raw.get("PreviousSpec") if rollback else spec
        raw["Version"] = {"Index": version + 1}
        self.state[(kind, object_id)] = raw

    def inspect(self, kind: str, object_id: str) -> dict[str, Any]:
        self.calls.append(("inspect", (kind, object_id)))
        if (kind, object_id) in self.state:
            raw = self.state[(kind, object_id)]
            if raw is None:
                raise WriteFailure("not_found", f"no {kind} {object_id}")
            return raw
        return self._cached(kind, object_id)

    def remove(self, kind: str, object_id: str, *, force: bool = False) -> None:
        self.calls.append(("remove", (kind, object_id, force)))
        self.state[(kind, object_id)] = None

    def create(self, kind: str, body: dict[str, Any]) -> str:
        self.calls.append(("create", (kind, body)))
        raise WriteFailure("invalid", "the recording writer creates nothing")

    def has_container(self, container: str) -> bool:
        self.calls.append(("has_container", container))
        return True

    def remove_container(self, container: str) -> None:
        self.calls.append(("remove_container", container))

    def service_status(self, service_id: str) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass

    @property
    def writes(self) -> list[tuple[str, Any]]:
        return [call for call in self.calls if call[0] in ("update", "remove", "create", "remove_container")]


@contextmanager
def running(**settings: Any) -> Iterator[tuple[Harness, RecordingWriter]]:
    objects = cluster()
    harness = build_harness(FakeEngine(objects), **settings)
    harness.start()
    writer = RecordingWriter(harness)
    harness.runtime.writer = writer   # type: ignore[assignment]
    try:
        yield harness, writer
    finally:
        harness.stop()


def identity(user: str | None) -> Identity:
    return ANONYMOUS if user is None else Identity(user, user, "headers")


@contextmanager
def agent(harness: Harness, user: str | None = None, client: str | None = "client-1") -> Iterator[None]:
    """A ``POST /mcp`` request context with the agent's identity and OAuth client set, as the transport does."""
    with harness.app.test_request_context("/mcp", method="POST"):
        g.identity = identity(user)
        g.mcp_client_id = client
        yield


def call(name: str, arguments: dict[str, Any] | None = None, *, user: str | None = None) -> dict[str, Any]:
    ctx = CallContext(identity(user), "2025-11-25")
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return METHODS["tools/call"](ctx, params)


def listed(user: str | None = None) -> list[str]:
    ctx = CallContext(identity(user), "2025-11-25")
    return [tool["name"] for tool in METHODS["tools/list"](ctx, {})["tools"]]


def text(result: dict[str, Any]) -> str:
    content = result["content"]
    assert isinstance(content, list) and content[0]["type"] == "text"
    return str(content[0]["text"])
