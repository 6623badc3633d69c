"""Dynamic client registration (RFC 7591): ``POST /oauth/register``, open to anyone, public clients only.

Written as plain code rather than with authlib's ``ClientRegistrationEndpoint``: that endpoint defaults
``token_endpoint_auth_method`` to ``client_secret_basic``, always generates a secret and validates against
authorization-server metadata, so each of those would need overriding to reach the few rules below.

- Body: a JSON object of at most 64 KiB. ``redirect_uris`` is required (https, or http to a loopback host);
  ``client_name``, ``grant_types`` (⊆ authorization_code, refresh_token), ``response_types`` (⊆ code) and
  ``token_endpoint_auth_method`` (only ``none``, the default) are optional; other members (``scope``,
  ``application_type``, …) are ignored.
- 201 with the registered metadata, a generated ``client_id`` and ``client_id_issued_at``; no secret.
- 400 ``{error: invalid_client_metadata | invalid_redirect_uri, error_description}``; 413 for a larger body.
- At most ``mcp.oauth.dcr_rate_limit`` registrations per hour per client address (the peer, or what a
  trusted proxy forwards: :func:`app.oauth.addresses.client_address`): beyond it 429
  ``{error: too_many_requests}`` with ``Retry-After`` (seconds until the oldest registration of the hour
  leaves the window). The count lives in the worker's memory (a restart forgets it).
- At most ``mcp.oauth.dcr_max_clients`` clients are kept; the least recently used is evicted
  (:mod:`app.store.oauth_clients`).
"""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, Response, request

from app.oauth.addresses import client_address, redirect_uri_problem
from app.oauth.clients import client_registry
from app.runtime import runtime_of

MAX_BODY = 64 * 1024
WINDOW = 3600.0             # seconds the per-address count looks back
BUCKET = 60.0               # registrations of one address within a minute share one counter
MAX_ADDRESSES = 10_000      # addresses whose counts are kept (the least recently seen forgotten first)
MAX_REDIRECT_URIS = 16
MAX_NAME = 200
GRANT_TYPES = ("authorization_code", "refresh_token")
RESPONSE_TYPES = ("code",)
LIMITER_KEY = "shoal.oauth.registration_limit"
PATH = "/oauth/register"


class RegistrationLimiter:
    """Registrations per client address over the last hour.

    Each address keeps at most one counter per minute (so memory stays bounded whatever the configured
    limit), stamped with its newest registration: a counter leaves the window an hour after that stamp,
    so the count never forgets a registration early and a refused client waits at most an hour."""

    def __init__(self, limit: int, window: float = WINDOW, bucket: float = BUCKET,
                 max_addresses: int = MAX_ADDRESSES, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.bucket, self.max_addresses = limit, window, bucket, max_addresses
        self._clock = clock
        self._seen: OrderedDict[str, OrderedDict[int, list[float]]] = OrderedDict()   # bucket → [newest, count]

    def _buckets(self, address: str, now: float) -> OrderedDict[int, list[float]]:
        buckets = self._seen.get(address)
        if buckets is None:
            return OrderedDict()
        while buckets and next(iter(buckets.values()))[0] + self.window <= now:
            buckets.popitem(last=False)
        return buckets

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may register again, or None when it may now."""
        now = self._clock()
        buckets = self._buckets(address, now)
        total = sum(int(count) for _, count in buckets.values())
        if total < self.limit:
            return None
        excess, freed = total - self.limit + 1, 0
        for newest, count in buckets.values():
            freed += int(count)
            if freed >= excess:
                return max(1, math.ceil(newest + self.window - now))
        return math.ceil(self.window)   # pragma: no cover (the loop always reaches the excess)

    def record(self, address: str) -> None:
        now = self._clock()
        buckets = self._buckets(address, now)
        key = int(now // self.bucket)
        entry = buckets.setdefault(key, [now, 0])
        entry[0], entry[1] = now, entry[1] + 1
        self._seen[address] = buckets
        self._seen.move_to_end(address)
        while len(self._seen) > self.max_addresses:
            self._seen.popitem(last=False)


class InvalidRegistration(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error, self.description = error, description


@dataclass(frozen=True, slots=True)
class Metadata:
    client_name: str | None
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    response_types: tuple[str, ...]


def parse_metadata(document: Any) -> Metadata:
    """The registration a JSON body asks for; :class:`InvalidRegistration` naming what is wrong."""
    if not isinstance(document, dict):
        raise InvalidRegistration("invalid_client_metadata", "the body must be a JSON object")
    method = document.get("token_endpoint_auth_method")
    if method is not None and method != "none":
        raise InvalidRegistration("invalid_client_metadata",
                                  f"token_endpoint_auth_method {str(method)[:60]!r} is not supported: only public "
                                  "clients are registered ('none'; no client secret is issued)")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise InvalidRegistration("invalid_redirect_uri",
                                  f"redirect_uris is required: a list of 1 to {MAX_REDIRECT_URIS} URLs")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise InvalidRegistration("invalid_redirect_uri", problem)
    name = document.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME
                             or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name)):
        raise InvalidRegistration("invalid_client_metadata",
                                  f"client_name must be text of at most {MAX_NAME} characters")
    grant_types = _subset(document, "grant_types", GRANT_TYPES)
    if "authorization_code" not in grant_types:
        raise InvalidRegistration("invalid_client_metadata", "grant_types must include authorization_code")
    response_types = _subset(document, "response_types", RESPONSE_TYPES)
    return Metadata(name or None, tuple(dict.fromkeys(uris)), grant_types, response_types)


def _subset(document: dict[str, Any], member: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    value = document.get(member)
    if value is None:
        return allowed
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise InvalidRegistration("invalid_client_metadata", f"{member} must be a non-empty list of strings")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InvalidRegistration("invalid_client_metadata",
                                  f"{member} {unknown[:4]} not supported (only {', '.join(allowed)})")
    return tuple(v for v in allowed if v in value)


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(body), status=status, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _error(status: int, error: str, description: str, headers: dict[str, str] | None = None) -> Response:
    return _json(status, {"error": error, "error_description": description}, headers)


def _body() -> bytes | None:
    """The request body, or None when it is larger than :data:`MAX_BODY` (read no further than that)."""
    length = request.content_length
    if length is not None and length > MAX_BODY:
        return None
    data = request.stream.read(MAX_BODY + 1)
    return None if len(data) > MAX_BODY else data


def init_registration(app: Flask) -> None:
    """Put the client registry in ``app.extensions`` and, with ``mcp.oauth.dcr_enabled``, serve
    ``POST /oauth/register``. No I/O: the store opens on first use."""
    settings = runtime_of(app).settings
    registry = client_registry(app)
    if not settings.mcp_dcr_enabled:
        return
    limiter = app.extensions[LIMITER_KEY] = RegistrationLimiter(settings.mcp_dcr_rate_limit)
    trusted = settings.trusted_proxies

    def register() -> Response:
        address = client_address(request.environ, trusted)
        wait = limiter.retry_after(address)
        if wait is not None:
            return _error(429, "too_many_requests",
                          f"at most {limiter.limit} client registrations per hour from one address",
                          {"Retry-After": str(wait)})
        mimetype = request.mimetype or ""
        if mimetype != "application/json" and not mimetype.endswith("+json"):
            return _error(400, "invalid_client_metadata", "the body must be JSON (Content-Type: application/json)")
        raw = _body()
        if raw is None:
            return _error(413, "invalid_client_metadata", f"the body is larger than {MAX_BODY} bytes")
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "invalid_client_metadata", "the body is not valid JSON")
        try:
            metadata = parse_metadata(document)
        except InvalidRegistration as exc:
            return _error(400, exc.error, exc.description)
        client = registry.register(client_name=metadata.client_name, redirect_uris=metadata.redirect_uris,
                                   grant_types=metadata.grant_types, response_types=metadata.response_types)
        limiter.record(address)
        answer: dict[str, Any] = {"client_id": client.client_id}
        if client.client_name is not None:
            answer["client_name"] = client.client_name
        answer.update(redirect_uris=list(client.redirect_uris), grant_types=list(client.grant_types),
                      response_types=list(client.response_types), token_endpoint_auth_method="none",
                      client_id_issued_at=int(client.issued_at))
        return _json(201, answer)

    app.add_url_rule(PATH, "oauth_register", register, methods=["POST"])
