"""Shared pieces of the MCP resource tests (no tests here): an app on the synthetic cluster with the headers
auth mode and a policy, handler calls inside a request context as a given user, and a fake Subscriber.

Users: ``alice`` reads ``stack:shop``; ``bob`` (group ops) reads ``service:monitor`` and ``node:worker-1``;
``root`` reads everything; ``nobody`` has no grant.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import g

import app.mcp.completion
import app.mcp.resources
from app.auth.identity import Identity
from app.mcp.registry import METHODS, CallContext, RpcError
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

assert app.mcp.completion.complete is METHODS["completion/complete"]

POLICY = {"grants": [
    {"resources": ["stack:shop"], "audience": ["user:alice"], "permissions": ["read"]},
    {"resources": ["service:monitor", "node:worker-1"], "audience": ["group:ops"], "permissions": ["read"]},
    {"resources": ["*"], "audience": ["user:root"], "permissions": ["read"]},
]}
ACL_SETTINGS: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User", "headers_groups": "X-Groups",
                                "trusted_proxies": ("127.0.0.1/32",), "acl_policy": json.dumps(POLICY)}


def identity(user: str) -> Identity:
    return Identity(user, user, "headers", groups=("ops",) if user == "bob" else ())


def rest_headers(user: str) -> dict[str, str]:
    return {"X-User": user, "X-Groups": "ops" if user == "bob" else "", "Accept": "application/json"}


@dataclass(eq=False)
class FakeSession:
    identity: Identity
    id: str = "session-1"
    version: str = "2025-11-25"
    subscriptions: set[str] = field(default_factory=set)


@dataclass(eq=False)
class FakeSubscriber:
    """A Subscriber as the transport's sessions and listen streams are: wants() by URI, notify() records."""

    identity: Identity
    uris: set[str] = field(default_factory=set)
    list_changed: bool = False
    full: bool = False
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def wants(self, uri: str) -> bool:
        return uri in self.uris

    def notify(self, method: str, params: dict[str, Any]) -> bool:
        if self.full:
            return False
        self.received.append((method, params))
        return True

    def updated(self) -> list[str]:
        return [params["uri"] for method, params in self.received if method == "notifications/resources/updated"]

    def list_changes(self) -> int:
        return sum(1 for method, _ in self.received if method == "notifications/resources/list_changed")


def start(**settings: Any) -> Iterator[Harness]:
    built = build_harness(FakeEngine(cluster()), **settings)
    built.start()
    try:
        yield built
    finally:
        built.stop()


@pytest.fixture(scope="module")
def acl_app() -> Iterator[Harness]:
    yield from start(**ACL_SETTINGS)


def call(harness: Harness, user: str, method: str, params: dict[str, Any], *, version: str = "2025-11-25",
         session: FakeSession | None = None) -> dict[str, Any]:
    """Run one handler as the transport does: in the request context of a POST /mcp, as ``user``."""
    who = identity(user)
    with harness.app.test_request_context("/mcp", method="POST"):
        g.identity = who
        return METHODS[method](CallContext(who, version, session), params)


def call_error(harness: Harness, user: str, method: str, params: dict[str, Any], **kwargs: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        call(harness, user, method, params, **kwargs)
    return caught.value


def read_json(harness: Harness, user: str, uri: str) -> Any:
    result = call(harness, user, "resources/read", {"uri": uri})
    (content,) = result["contents"]
    assert content["uri"] == uri and content["mimeType"] == "application/json"
    return json.loads(content["text"])
