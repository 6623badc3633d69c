"""The consent page's CSRF protection: an HMAC token bound to a cookie, the human and the request.

The GET of ``/oauth/authorize`` sets a random nonce cookie (``HttpOnly``, ``SameSite=Strict``, path
``<base_path>/oauth/``, ``Secure`` over TLS or behind an https issuer) and puts in the form
``HMAC-SHA256(signing key, nonce | subject | client_id | redirect_uri | code_challenge)``. The POST is
accepted only when the cookie is there and the form's token is the HMAC of that cookie for this human and
this very request: a cross-site form post has neither the cookie (Strict) nor a way to compute the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from flask import Request, Response

COOKIE = "shoal_oauth_csrf"
FIELD = "csrf_token"
_NONCE = re.compile(r"[A-Za-z0-9_-]{32,64}")


def cookie_nonce(request: Request) -> str | None:
    value = request.cookies.get(COOKIE)
    return value if value and _NONCE.fullmatch(value) else None


def new_nonce() -> str:
    return secrets.token_urlsafe(32)


def csrf_token(key: bytes, nonce: str, subject: str, client_id: str, redirect_uri: str, challenge: str) -> str:
    message = "\x00".join(("consent", nonce, subject, client_id, redirect_uri, challenge)).encode("utf-8",
                                                                                                  "surrogatepass")
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def csrf_valid(key: bytes, request: Request, token: str | None, subject: str, client_id: str,
               redirect_uri: str, challenge: str) -> bool:
    nonce = cookie_nonce(request)
    if nonce is None or not token:
        return False
    expected = csrf_token(key, nonce, subject, client_id, redirect_uri, challenge)
    return hmac.compare_digest(expected.encode(), token.encode("utf-8", "surrogatepass"))


def set_cookie(response: Response, nonce: str, path: str, secure: bool) -> None:
    response.set_cookie(COOKIE, nonce, path=path, httponly=True, samesite="Strict", secure=secure,
                        max_age=3600)
