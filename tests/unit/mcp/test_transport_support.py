"""Shared pieces of the transport tests (no tests here): an app with ``/mcp`` on the synthetic cluster (auth
mode none; an agent's identity can be chosen with ``X-Agent`` through a stand-in bearer check), requests of
both revision families, and an SSE body read chunk by chunk in-process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Request
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.auth.identity import ANONYMOUS, Identity
from app.oauth.caller import AgentCaller
from tests.fakes import FakeEngine
from tests.unit.objects import cluster
from tests.unit.support import Harness, build_harness

SESSION = "Mcp-Session-Id"
VERSION = "MCP-Protocol-Version"
LATEST = "2025-11-25"
MODERN = "2026-07-28"


def _agent(request: Request) -> AgentCaller:
    """The bearer check, standing in: ``X-Agent: alice`` is the agent alice (else anonymous)."""
    name = request.headers.get("X-Agent")
    return AgentCaller(Identity(name, name, "oauth") if name else ANONYMOUS, "client-1" if name else None)


def make_harness(monkeypatch: pytest.MonkeyPatch, **settings: Any) -> Iterator[Harness]:
    monkeypatch.setattr("app.oauth.bearer.authenticate_agent", _agent)
    built = build_harness(FakeEngine(cluster()), mcp_enabled=True, **settings)
    built.start()
    try:
        yield built
    finally:
        built.runtime.draining.set()   # ends the session reaper and any stream left open
        built.stop()


@pytest.fixture
def mcp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    yield from make_harness(monkeypatch)


def initialize(client: FlaskClient, version: str = LATEST, **headers: str) -> TestResponse:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {"roots": {}},
                       "clientInfo": {"name": "unit", "version": "1"}}}
    return client.post("/mcp", json=body, headers=headers)


def open_session(client: FlaskClient, version: str = LATEST, **headers: str) -> dict[str, str]:
    """Initialize and return the headers of the session's later requests."""
    answer = initialize(client, version, **headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    negotiated = answer.get_json()["result"]["protocolVersion"]
    return {**headers, SESSION: answer.headers[SESSION], VERSION: negotiated}


def rpc(client: FlaskClient, method: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
        request_id: int | str | None = 7) -> TestResponse:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        body["id"] = request_id
    if params is not None:
        body["params"] = params
    return client.post("/mcp", json=body, headers=headers or {})


def modern_meta(version: str = MODERN) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"}}


def modern(client: FlaskClient, method: str, params: dict[str, Any] | None = None, *, name: str | None = None,
           headers: dict[str, str] | None = None, request_id: int | str = 3) -> TestResponse:
    """A stateless request with matching routing headers (unless ``headers`` overrides them)."""
    sent = {VERSION: MODERN, "Mcp-Method": method}
    if name is not None:
        sent["Mcp-Name"] = name
    sent.update(headers or {})
    body = {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**(params or {}), "_meta": modern_meta()}}
    return client.post("/mcp", json=body, headers=sent)


def error_of(answer: TestResponse) -> dict[str, Any]:
    assert answer.mimetype == "application/json", answer.get_data(as_text=True)
    body = answer.get_json()
    assert body["jsonrpc"] == "2.0" and "result" not in body
    error: dict[str, Any] = body["error"]
    return error


class Chunks:
    """An SSE body read in-process: each ``next()`` is what the body yields next (it may wait)."""

    def __init__(self, answer: TestResponse) -> None:
        assert answer.status_code == 200 and answer.mimetype == "text/event-stream", answer.status_code
        self.answer = answer
        self._body = iter(answer.response)

    def next(self) -> bytes:
        chunk = next(self._body)
        return chunk if isinstance(chunk, bytes) else chunk.encode()

    def rest(self) -> bytes:
        return b"".join(c if isinstance(c, bytes) else c.encode() for c in self._body)

    def close(self) -> None:
        self.answer.close()
