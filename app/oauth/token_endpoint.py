"""``POST /oauth/token``: the ``authorization_code`` and ``refresh_token`` grants (docs/oauth.md, Tokens).

Clients are public (``token_endpoint_auth_method=none``): ``client_id`` comes in the form (or, for a
client that sends HTTP Basic anyway, as its user name; no secret exists to check). What binds a grant to
its client is the code or refresh token itself: the ``client_id`` presented must be the one it was issued
to.

Every answer carries ``Cache-Control: no-store`` and ``Pragma: no-cache``; errors are
``{error, error_description}`` (400; 413 for an oversized form; 500 ``server_error``).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from flask import Response, jsonify, request

from app.oauth.forms import NO_STORE, OAuthError, form_params
from app.oauth.server import OAuthServer, current_server
from app.oauth.tokens import hash_token, new_refresh_token, pkce_matches, valid_verifier
from app.store.oauth_grants import RefreshRecord, Rotation

log = logging.getLogger(__name__)


def token() -> Response:
    server = current_server()
    try:
        params = form_params(request)
        grant_type = params.get("grant_type")
        if not grant_type:
            raise OAuthError("invalid_request", "grant_type is missing")
        if grant_type == "authorization_code":
            body = _authorization_code(server, params)
        elif grant_type == "refresh_token":
            body = _refresh(server, params)
        else:
            raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
    except OAuthError as exc:
        return exc.response()
    except Exception:
        log.exception("token request failed")
        return OAuthError("server_error", "the token could not be issued", 500).response()
    response = jsonify(body)
    response.headers.update(NO_STORE)
    return response


def _client_id(params: dict[str, str]) -> str:
    client_id = params.get("client_id") or (request.authorization.username if request.authorization else None)
    if not client_id:
        raise OAuthError("invalid_request", "client_id is missing")
    return client_id


def _resource(server: OAuthServer, params: dict[str, str]) -> str | None:
    """The ``resource`` asked for (RFC 8707): None when absent and not required."""
    resource = params.get("resource") or None
    if resource is None and server.settings.mcp_require_resource_indicator:
        raise OAuthError("invalid_request", f"the resource parameter is required ({server.issuer.resource})")
    if resource is not None and resource != server.issuer.resource:
        raise OAuthError("invalid_target", f"the only resource here is {server.issuer.resource}")
    return resource


def _authorization_code(server: OAuthServer, params: dict[str, str]) -> dict[str, Any]:
    client_id = _client_id(params)
    code, redirect_uri, verifier = params.get("code"), params.get("redirect_uri"), params.get("code_verifier")
    for name, value in (("code", code), ("redirect_uri", redirect_uri), ("code_verifier", verifier)):
        if not value:
            raise OAuthError("invalid_request", f"{name} is missing")
    assert code is not None and verifier is not None
    if not valid_verifier(verifier):
        raise OAuthError("invalid_request", "code_verifier must be 43 to 128 unreserved characters")
    resource = _resource(server, params)
    grant = server.codes.redeem(code)   # gone from here on, whatever follows: single use
    if grant is None:
        raise OAuthError("invalid_grant", "the code is unknown, used or expired")
    if grant.client_id != client_id:
        raise OAuthError("invalid_grant", "the code was issued to another client")
    if grant.redirect_uri != redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
    if not pkce_matches(verifier, grant.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
    if resource is not None and resource != grant.resource:
        raise OAuthError("invalid_target", "the resource differs from the authorization request's")
    if not grant.refresh:   # the client did not register the refresh_token grant
        return _reply(server, grant.subject, grant.groups, client_id, None)
    token, token_hash = new_refresh_token()
    now = time.time()
    server.grants().add(RefreshRecord(token_hash, secrets.token_urlsafe(16), client_id, grant.subject, grant.groups,
                                      grant.resource, now, now + server.settings.mcp_refresh_token_ttl))
    return _reply(server, grant.subject, grant.groups, client_id, token)


def _refresh(server: OAuthServer, params: dict[str, str]) -> dict[str, Any]:
    presented = params.get("refresh_token")
    if not presented:
        raise OAuthError("invalid_request", "refresh_token is missing")
    client_id = params.get("client_id") or (request.authorization.username if request.authorization else None)
    resource = _resource(server, params)
    grants = server.grants()
    old_hash = hash_token(presented)
    record = grants.get(old_hash)
    if record is None:
        raise OAuthError("invalid_grant", "the refresh token is unknown, expired or revoked")
    if client_id is not None and client_id != record.client_id:
        raise OAuthError("invalid_grant", "the refresh token was issued to another client")
    if resource is not None and resource != record.resource:
        raise OAuthError("invalid_target", "the resource differs from the grant's")
    token, token_hash = new_refresh_token()
    now = time.time()
    successor = RefreshRecord(token_hash, record.family, record.client_id, record.subject, record.groups,
                              record.resource, now, now + server.settings.mcp_refresh_token_ttl)
    outcome = grants.rotate(old_hash, successor)
    if outcome is Rotation.REPLAYED:
        log.warning("a used refresh token was presented again: its grant family is revoked",
                    extra={"client_id": record.client_id, "subject": record.subject})
    if outcome is not Rotation.ROTATED:
        raise OAuthError("invalid_grant", "the refresh token is unknown, expired or revoked")
    return _reply(server, record.subject, record.groups, record.client_id, token)


def _reply(server: OAuthServer, subject: str, groups: tuple[str, ...], client_id: str,
           refresh_token: str | None) -> dict[str, Any]:
    tokens = server.access_tokens()
    body: dict[str, Any] = {"access_token": tokens.issue(subject, groups, client_id), "token_type": "Bearer",
                            "expires_in": tokens.ttl}
    if refresh_token is not None:
        body["refresh_token"] = refresh_token
    return body
