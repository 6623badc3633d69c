"""Engine writes: every change Shoal makes to the swarm goes through here, with optimistic concurrency.

Why a module apart from ``app.engine.client``: the watcher's client only reads and is owned by the watcher
greenlet; writes run in request greenlets (cooperative sockets under gevent), each on a short-lived
connection of one shared low-level client. Every update carries the object's version index, so a write
based on a stale read is refused by the engine ("update out of sequence") instead of overwriting someone
else's change. Failures become one ``WriteFailure`` whose ``reason`` the HTTP layer maps to the domain
codes (``SVC001``, ``NOD002``, ``CFG001``...), so no docker type leaks upward.

A transport failure is told apart by whether the engine may have the request: refused or timed out while
connecting, nothing was sent (``unavailable``: nothing applied, safe to retry); a write that timed out
waiting for the answer, or whose connection dropped after it was sent, has an ``unknown`` outcome: the
engine may apply it later (a stopped engine does, once it runs again).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any, Literal

import docker
import docker.errors
import requests
import urllib3.exceptions

from app.errors import ProblemError

Raw = dict[str, Any]
Reason = Literal["out_of_sequence", "in_use", "exists", "not_found", "invalid", "unavailable", "unknown",
                 "failed"]
# Root causes that prove the request never reached the engine.
_NOT_SENT = (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError,
             FileNotFoundError, socket.gaierror)


class WriteFailure(Exception):
    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message


def outcome_unknown(what: str, failure: WriteFailure, check: list[str], *, retry_safe: bool) -> ProblemError:
    """504 ``ENG005``: the write may have been applied (or may still be); the body says where to look
    (``check``: URLs) and whether retrying is safe (only with the same Idempotency-Key)."""
    retry = ("Retry with the same Idempotency-Key: it cannot apply the change twice." if retry_safe
             else "Retrying without an Idempotency-Key may apply it twice.")
    return ProblemError("ENG005", detail=f"{what}: {failure.message}. The write may have been applied, or may "
                                         f"still be; check {' or '.join(check) or 'the object'} (its history entry "
                                         f"carries this requestId in audit). {retry}",
                        extra={"outcome": "unknown", "check": check})


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and what it wraps (``args``, urllib3's ``reason``, the chain), a bounded walk."""
    seen: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack and len(seen) < 16:
        item = stack.pop()
        if any(item is other for other in seen):
            continue
        seen.append(item)
        yield item
        nested = [*item.args, getattr(item, "reason", None), item.__cause__, item.__context__]
        stack.extend(inner for inner in nested if isinstance(inner, BaseException))


def _transport_reason(exc: Exception, is_write: bool) -> Reason:
    """``unavailable`` when the request cannot have reached the engine (or is a read), else ``unknown``."""
    if not is_write or isinstance(exc, requests.exceptions.ConnectTimeout):
        return "unavailable"
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return "unknown"
    if any(isinstance(cause, _NOT_SENT) for cause in _causes(exc)):
        return "unavailable"
    return "unknown"


def classify(exc: Exception, *, is_write: bool = False) -> WriteFailure:
    """An engine error as a reason; the engine says little in status codes (an out-of-sequence update is
    a 500 ``rpc error ... update out of sequence``), so the message decides where it is specific.
    ``is_write``: the request changes state, so a transport failure after sending is an ``unknown`` outcome."""
    if isinstance(exc, WriteFailure):
        return exc
    if isinstance(exc, docker.errors.APIError):
        text = str(exc.explanation or exc)
        lowered = text.lower()
        status = exc.status_code or 0
        if "out of sequence" in lowered:
            return WriteFailure("out_of_sequence", text)
        if "in use" in lowered or "active endpoints" in lowered or "is referenced" in lowered:
            return WriteFailure("in_use", text)
        if "code = unimplemented" in lowered:   # a change swarmkit never allows (service mode): a bad argument
            return WriteFailure("invalid", text)
        if status == 404:
            return WriteFailure("not_found", text)
        if status == 409 or "already exists" in lowered or "name conflicts" in lowered:
            return WriteFailure("exists", text)
        if status == 400 or "invalidargument" in lowered.replace(" ", "") or "invalid" in lowered:
            return WriteFailure("invalid", text)
        if status == 503:
            return WriteFailure("unavailable", text)
        return WriteFailure("failed", text)
    if isinstance(exc, (requests.exceptions.RequestException, OSError)):
        reason = _transport_reason(exc, is_write)
        if reason == "unknown":
            return WriteFailure("unknown", f"no answer from the engine after the request was sent ({exc})")
        return WriteFailure("unavailable", str(exc))
    return WriteFailure("failed", str(exc))


class EngineWriter:
    """The write calls Shoal makes; one low-level client (``timeout`` per call), created lazily."""

    def __init__(self, base_url: str, api_version: str = "1.41", timeout: float = 10.0) -> None:
        self._base_url = base_url
        self._api_version = api_version
        self._timeout = timeout
        self._client: docker.APIClient | None = None

    @property
    def api(self) -> docker.APIClient:
        if self._client is None:
            self._client = docker.APIClient(base_url=self._base_url, version=self._api_version,
                                            timeout=self._timeout)  # type: ignore[arg-type]
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def call(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
             expect_json: bool = True, raw: bool = False, timeout: float | None = None) -> Any:
        """One engine request: the decoded JSON answer (None when empty or not ``expect_json``), or its text
        with ``raw`` (streamed answers such as plugin pulls); ``timeout`` overrides the client's for this
        call. Any failure, transport ones included, is a ``WriteFailure``."""
        api = self.api
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            url = api._url(path)  # type: ignore[attr-defined]
            if method == "GET":
                response = api._get(url, params=params, **extra)  # type: ignore[attr-defined]
            elif method == "DELETE":
                response = api._delete(url, params=params, **extra)  # type: ignore[attr-defined]
            else:
                response = api._post(url, params=params,  # type: ignore[attr-defined]
                                     data=None if body is None else json.dumps(body),
                                     headers={"Content-Type": "application/json"}, **extra)
            api._raise_for_status(response)  # type: ignore[attr-defined]
            if raw:
                return response.text
            if not expect_json or not response.content:
                return None
            return response.json()
        except Exception as exc:   # every failure, transport ones included, is classified
            raise classify(exc, is_write=method != "GET") from exc

    # ------------------------------------------------------------------ reads around a write
    def inspect(self, kind: str, object_id: str) -> Raw:
        """Read back after a write (the answer is the engine's state, not a guess)."""
        result: Raw = self.call("GET", f"/{kind}s/{object_id}")
        return result

    def service_status(self, service_id: str) -> Raw | None:
        """The service with ``ServiceStatus`` (running/desired), which inspect does not carry."""
        found = self.call("GET", "/services", params={"filters": json.dumps({"id": [service_id]}),
                                                      "status": "true"})
        matches = [s for s in found or [] if s.get("ID") == service_id]
        return matches[0] if matches else None

    # ------------------------------------------------------------------ updates (versioned)
    def update_service(self, service_id: str, version: int, spec: Raw, *, rollback: bool = False) -> Raw:
        params: dict[str, Any] = {"version": version}
        if rollback:
            params["rollback"] = "previous"
        result = self.call("POST", f"/services/{service_id}/update", params=params, body=spec)
        return result if isinstance(result, dict) else {}

    def update_node(self, node_id: str, version: int, spec: Raw) -> None:
        self.call("POST", f"/nodes/{node_id}/update", params={"version": version}, body=spec, expect_json=False)

    def update_config(self, kind: str, object_id: str, version: int, spec: Raw) -> None:
        """Configs and secrets: only labels may change (the engine refuses anything else)."""
        self.call("POST", f"/{kind}s/{object_id}/update", params={"version": version}, body=spec,
                  expect_json=False)

    def update_spec(self, kind: str, object_id: str, version: int, spec: Raw, *, rollback: bool = False) -> None:
        """The versioned update of a service, node, config or secret."""
        if kind == "service":
            self.update_service(object_id, version, spec, rollback=rollback)
        elif kind == "node":
            self.update_node(object_id, version, spec)
        else:
            self.update_config(kind, object_id, version, spec)

    # ------------------------------------------------------------------ creates and removals
    def create(self, kind: str, body: Raw) -> str:
        """Create a config, secret, network or volume; the new id (a volume's name)."""
        result = self.call("POST", f"/{kind}s/create", body=body)
        if not isinstance(result, dict):
            raise WriteFailure("failed", f"the engine answered the {kind} create without a body")
        return str(result.get("ID") or result.get("Id") or result.get("Name") or "")

    def remove(self, kind: str, object_id: str, *, force: bool = False) -> None:
        params = {"force": "true"} if force else None
        self.call("DELETE", f"/{kind}s/{object_id}", params=params, expect_json=False)

    def remove_container(self, container_id: str) -> None:
        self.call("DELETE", f"/containers/{container_id}", params={"force": "true"}, expect_json=False)

    def has_container(self, container_id: str) -> bool:
        """Whether this engine has the container (a task's container lives on its node's engine only)."""
        try:
            self.call("GET", f"/containers/{container_id}/json")
        except WriteFailure as failure:
            if failure.reason == "not_found":
                return False
            raise
        return True
