"""``/auth/login``, ``/auth/callback`` and ``POST /auth/logout`` (docs/auth.md, oidc), thin views over
:class:`app.auth.oidc.OidcProvider`.

Registered in every mode, so the OpenAPI document (one document whatever the mode) describes them; in a
mode other than ``oidc`` they are 404. This module does not import authlib: mode ``none`` never loads it.
:func:`document_login_redirects` adds the OIDC browser redirect (302 to the login) to the authenticated
GETs of the document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from flask import current_app, request
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.exceptions import NotFound
from werkzeug.wrappers import Response

from app.blueprints.docs import errors
from app.http import admission
from app.http.auth import BYPASS_PREFIXES, provider_of

if TYPE_CHECKING:
    from app.auth.oidc import OidcProvider

blp = Blueprint("oidc", __name__, url_prefix="/auth",
                description="OpenID Connect browser login (auth.mode = oidc; 404 in the other modes).")

_LOCATION = {"Location": {"schema": {"type": "string"}, "description": "where the browser goes next"}}
_SET_COOKIE = {"Set-Cookie": {"schema": {"type": "string"},
                              "description": "the signed cookie (HttpOnly, SameSite=Lax; __Host- and Secure "
                                             "under TLS)"}}
_NOT_OIDC = "Not available: auth.mode is not oidc."


def _provider() -> OidcProvider:
    provider = provider_of(current_app)
    if provider.mode != "oidc":
        raise NotFound(_NOT_OIDC)
    return cast("OidcProvider", provider)


@blp.route("/login")
@admission.exempt   # may fetch the provider's discovery document: I/O, not CPU
class Login(MethodView):
    @blp.doc(parameters=[{"in": "query", "name": "redirect", "required": False, "schema": {"type": "string"},
                          "description": "a path on this service to return to after the login (default: the "
                                         "base path; anything but a relative path is replaced by it)"}])
    @blp.response(302, description="To the provider's authorization endpoint (authorization code flow with "
                                   "PKCE S256, state and nonce), with a signed login-flow cookie for 300 s.",
                  headers={**_LOCATION, **_SET_COOKIE})
    @errors(blp, 403, 404, codes={403: "The identity provider cannot be reached (AUT002).", 404: _NOT_OIDC})
    def get(self) -> Response:
        return _provider().begin_login(request.args.get("redirect"))


@blp.route("/callback")
@admission.exempt   # exchanges the code at the provider's token endpoint
class Callback(MethodView):
    @blp.doc(parameters=[{"in": "query", "name": name, "required": False, "schema": {"type": "string"},
                          "description": description} for name, description in (
        ("code", "the authorization code"), ("state", "the state of this browser's login"),
        ("iss", "the issuer (RFC 9207), checked when present"),
        ("error", "the provider's refusal (e.g. access_denied)"), ("error_description", "ignored"))])
    @blp.response(302, description="Logged in: the session cookie is set and the browser goes back to the "
                                   "path saved at /auth/login.", headers={**_LOCATION, **_SET_COOKIE})
    @errors(blp, 400, 403, 404, codes={
        400: "Bad login callback: no login in progress or it expired, state, nonce, iss, aud or azp mismatch, "
             "or the ID token was refused (AUT003).",
        403: "The provider refused the login or the code, or cannot be reached (AUT002).",
        404: _NOT_OIDC, 500: "Internal login failure (AUT004)."})
    def get(self) -> Response:
        return _provider().finish_login(request.args, request.cookies)


@blp.route("/logout")
@admission.exempt   # may fetch the provider's discovery document
class Logout(MethodView):
    @blp.response(303, description="The session cookie is cleared; to the provider's end_session_endpoint when "
                                   "it advertises one, else to the base path.", headers={**_LOCATION, **_SET_COOKIE})
    @errors(blp, 403, 404, codes={403: "Cross-origin POST refused (Origin / Sec-Fetch-Site).", 404: _NOT_OIDC})
    def post(self) -> Response:
        return _provider().logout(request)


def document_login_redirects(document: dict[str, Any]) -> None:
    """Every authenticated GET that serves the dashboard (text/html) may answer a browser without a session
    with a 302 to the login (auth.mode = oidc)."""
    for path, operations in document.get("paths", {}).items():
        operation = operations.get("get")
        if operation is None or path.startswith(BYPASS_PREFIXES) or path in ("/api", "/auth"):
            continue
        ok = operation.get("responses", {}).get("200", {})
        if "text/html" in ok.get("content", {}):
            operation["responses"].setdefault("302", {
                "description": "auth.mode = oidc: a browser (text/html) without a valid session goes to "
                               "{base_path}/auth/login?redirect=<this path>.",
                "headers": dict(_LOCATION)})
