"""Managed plugins of the engine Shoal talks to: list, inspect, enable/disable, remove, settings, and the
registry paths (privileges, install = pull, upgrade).

Why not the cache: plugins are per engine and emit no swarm events, so each request reads them from the
engine (one local socket round-trip). Calls time out after 5 s, except the two that download from a
registry (``install``, ``upgrade``), which may take ``PULL_TIMEOUT``; a pull answers a stream of progress
messages whose last one may be an error, which is checked here.

Failures become problems: a plugin the engine does not know → 404 ``PLG004``; listing →
``PLG001``; privileges of a remote → ``PLG003``; the engine unreachable → 503 ``ENG001``; arguments
refused → 400 ``ENG003`` (409 when the engine says the plugin is in the wrong state: enabled, in use,
name taken); anything else → 500 ``ENG004``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from app.engine.swarm import EngineCalls, Raw
from app.engine.writes import WriteFailure, outcome_unknown
from app.errors import ProblemError

PULL_TIMEOUT = 300.0     # a download from a registry
ENABLE_WAIT = 20         # seconds the engine waits for the plugin to start (its ``timeout`` parameter)


def problem(failure: WriteFailure, code: str, *, what: str) -> ProblemError:
    detail = f"The engine refused {what}: {failure.message}"
    if failure.reason == "not_found":
        return ProblemError("PLG004", detail=detail)
    if failure.reason == "unknown":   # sent, then no answer: it may have been applied (ENG005, 504)
        return outcome_unknown(what, failure, [], retry_safe=False)
    if failure.reason == "unavailable":
        return ProblemError("ENG001", detail=detail, headers={"Retry-After": "1"})
    if failure.reason == "invalid":
        return ProblemError("ENG003", detail=detail)
    if failure.reason in ("exists", "in_use", "out_of_sequence"):
        return ProblemError("ENG003", status=409, detail=detail)
    return ProblemError(code, detail=detail)


def stream_error(text: str) -> str | None:
    """The error a streamed pull/upgrade answer ends with (the engine answers 200 once it has started
    writing progress, so a later failure is only in the stream), or None."""
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and (message.get("error") or message.get("errorDetail")):
            detail = message.get("errorDetail")
            text_of = detail.get("message") if isinstance(detail, dict) else None
            return str(message.get("error") or text_of or detail)
    return None


def _path(name: str) -> str:
    return "/plugins/" + quote(name, safe="/:@")   # as the docker SDK does: the engine routes name:.*


class PluginEngine:
    """The plugin calls Shoal makes (``docker plugin ...`` over the API)."""

    def __init__(self, calls: EngineCalls) -> None:
        self.calls = calls

    def _send(self, code: str, what: str, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.calls.call(method, path, **kwargs)
        except WriteFailure as failure:
            raise problem(failure, code, what=what) from None

    # ------------------------------------------------------------------ reads
    def all(self) -> list[Raw]:
        found = self._send("PLG001", "the plugin listing", "GET", "/plugins")
        if not isinstance(found, list):
            raise ProblemError("PLG001", detail="The engine's plugin listing is not a list.")
        return [p for p in found if isinstance(p, dict)]

    def inspect(self, name: str) -> Raw:
        found = self._send("ENG004", f"the inspect of plugin {name!r}", "GET", _path(name) + "/json")
        if not isinstance(found, dict):
            raise ProblemError("ENG004", detail=f"The engine's answer for plugin {name!r} is not an object.")
        return found

    def privileges(self, remote: str) -> list[Raw]:
        found = self._send("PLG003", f"the privileges of {remote!r}", "GET", "/plugins/privileges",
                           params={"remote": remote})
        if not isinstance(found, list):
            raise ProblemError("PLG003", detail=f"The engine's privileges of {remote!r} are not a list.")
        return [p for p in found if isinstance(p, dict)]

    # ------------------------------------------------------------------ toggles and removal
    def enable(self, name: str) -> None:
        self._send("ENG004", f"enabling plugin {name!r}", "POST", _path(name) + "/enable",
                   params={"timeout": ENABLE_WAIT}, timeout=ENABLE_WAIT + 5.0)

    def disable(self, name: str, *, force: bool = False) -> None:
        self._send("ENG004", f"disabling plugin {name!r}", "POST", _path(name) + "/disable",
                   params={"force": "true"} if force else None)

    def remove(self, name: str, *, force: bool = False) -> None:
        self._send("ENG004", f"removing plugin {name!r}", "DELETE", _path(name),
                   params={"force": "true"} if force else None)

    def configure(self, name: str, settings: list[str]) -> None:
        """``docker plugin set``: ``KEY=value`` for env, ``<args name>=a b`` for args."""
        self._send("ENG004", f"setting plugin {name!r}", "POST", _path(name) + "/set", body=settings)

    # ------------------------------------------------------------------ registry paths
    def _download(self, what: str, path: str, params: dict[str, Any], privileges: list[Raw]) -> None:
        text = self._send("ENG004", what, "POST", path, params=params, body=privileges, raw=True,
                          timeout=PULL_TIMEOUT)
        failed = stream_error(text or "")
        if failed is not None:
            raise ProblemError("ENG004", detail=f"The engine failed {what}: {failed}")

    def install(self, remote: str, name: str | None, privileges: list[Raw] | None, *, enable: bool) -> Raw:
        """``docker plugin install``: the privileges (those given, else the ones the remote asks for, all
        granted), the pull, then enable unless asked not to. Answers the installed plugin."""
        granted = self.privileges(remote) if privileges is None else privileges
        params = {"remote": remote, **({"name": name} if name else {})}
        self._download(f"installing {remote!r}", "/plugins/pull", params, granted)
        local = name or remote
        if enable:
            self.enable(local)
        return self.inspect(local)

    def upgrade(self, name: str, remote: str, privileges: list[Raw] | None) -> Raw:
        """``docker plugin upgrade`` (the engine wants the plugin disabled)."""
        granted = self.privileges(remote) if privileges is None else privileges
        self._download(f"upgrading {name!r} to {remote!r}", _path(name) + "/upgrade", {"remote": remote}, granted)
        return self.inspect(name)
