"""Authentication on every request: the configured provider makes ``g.identity`` or the request is 401.

Bypassed (docs/auth.md): ``/-/…``, ``/api…``, ``/auth/…``, ``/assets/…``; ``/mcp``, ``/oauth/…`` and
``/.well-known/…`` check their own credentials; ``/auth/whoami`` calls :func:`authenticate_now` itself.
Every method is authenticated, OPTIONS included: its ``Allow`` tells what the caller may do
(``app.http.options``). Missing or bad credentials are 401 ``AUT001`` with the mode's ``WWW-Authenticate``; a
provider failure is 403 ``AUT002``; an OIDC browser without a session is redirected to the login. With any
mode but ``none``, answers vary by user: ``Vary: Authorization, Cookie``.
"""

from __future__ import annotations

from flask import Flask, Response, g, redirect, request
from werkzeug.wrappers import Response as WerkzeugResponse

from app.auth.identity import ANONYMOUS, AuthenticationFailed, Identity, LoginRequired, ProviderRefused
from app.auth.providers import Provider, provider_for
from app.errors import ProblemError
from app.http.paths import is_meta
from app.runtime import runtime_of

_KEY = "shoal.auth"
PREMADE_KEY = "shoal.auth.premade"   # environ: an Identity or the provider's refusal, made once per request
# /mcp checks its bearer token itself (app.oauth.bearer); /oauth/ and /.well-known/ are the authorization
# server's, whose consent page authenticates the human itself.
BYPASS_PREFIXES = ("/-/", "/api", "/auth/", "/assets/", "/mcp", "/oauth/", "/.well-known/")


class _Redirect(Exception):
    def __init__(self, location: str) -> None:
        self.location = location


def provider_of(app: Flask) -> Provider:
    provider = app.extensions[_KEY]
    return provider  # type: ignore[no-any-return]


def authenticate_now() -> Identity:
    """The caller's identity (``g.identity`` when the hook made it), or the 401/403 problem."""
    identity = g.get("identity")
    if isinstance(identity, Identity):
        return identity
    from flask import current_app

    made = request.environ.pop(PREMADE_KEY, None)   # the response memo authenticated this request already
    try:
        if isinstance(made, Identity):
            identity = made
        elif isinstance(made, (AuthenticationFailed, ProviderRefused, LoginRequired)):
            raise made
        else:
            identity = provider_of(current_app).authenticate(request)
    except AuthenticationFailed as failure:
        headers = {"WWW-Authenticate": failure.challenge} if failure.challenge else None
        raise ProblemError("AUT001", detail=failure.detail, headers=headers) from None
    except ProviderRefused as refusal:
        raise ProblemError("AUT002", detail=str(refusal)) from None
    except LoginRequired as login:
        raise _Redirect(login.location) from None
    g.identity = identity
    return identity


def current_identity() -> Identity:
    """The identity of this request; anonymous on bypassed paths that did not authenticate."""
    identity = g.get("identity")
    return identity if isinstance(identity, Identity) else ANONYMOUS


def _authenticate() -> None:
    if request.path.startswith(BYPASS_PREFIXES):   # OPTIONS too: it tells what the caller may do
        return
    authenticate_now()


def _vary(response: Response) -> Response:
    if not is_meta(request.path):
        response.vary.add("Authorization")
        response.vary.add("Cookie")
    return response


def _redirect(error: _Redirect) -> WerkzeugResponse:
    return redirect(error.location, 302)


def init_auth(app: Flask) -> Provider:
    settings = runtime_of(app).settings
    provider = provider_for(settings)
    app.extensions[_KEY] = provider
    provider.init_app(app)
    app.register_error_handler(_Redirect, _redirect)
    if settings.auth_mode == "none":
        return provider   # anonymous: no hook, no Vary (every caller sees the same)
    app.before_request(_authenticate)
    app.after_request(_vary)
    return provider
