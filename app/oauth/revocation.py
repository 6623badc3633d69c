"""``POST /oauth/revoke`` (RFC 7009): a refresh token ends its whole grant family.

The answer is 200 with an empty body whether or not the token was known (an unknown, expired or access
token included: access tokens are self-contained and live until their ``exp``); only an unreadable
request (no ``token``, wrong content type, oversized form) is 400 ``invalid_request``.
"""

from __future__ import annotations

from flask import Response, request

from app.oauth.forms import NO_STORE, OAuthError, form_params
from app.oauth.server import current_server
from app.oauth.tokens import hash_token


def revoke() -> Response:
    try:
        params = form_params(request)
        token = params.get("token")
        if not token:
            raise OAuthError("invalid_request", "token is missing")
    except OAuthError as exc:
        return exc.response()
    current_server().grants().revoke_family(hash_token(token))
    return Response(b"", 200, headers=NO_STORE)
