"""``/oauth/authorize``: the authorization endpoint and its consent page (docs/oauth.md, Authorize).

Checks, in order (RFC 6749 §4.1.2.1 and RFC 9700: nothing is redirected before the client and its
redirect URI are known to go together, so the endpoint is never an open redirector):

1. ``client_id`` names a client (registered, or a metadata document) and ``redirect_uri`` is one of its
   redirect URIs, character for character. Otherwise an HTML error page (400), no redirect.
2. ``response_type=code`` (else ``unsupported_response_type``); ``code_challenge`` present and
   ``code_challenge_method=S256`` (missing or ``plain``: ``invalid_request``); ``resource`` present (unless
   ``mcp.oauth.require_resource_indicator`` is off) and equal to the canonical ``/mcp`` URL (else
   ``invalid_target``). These errors redirect back with ``error``, ``state`` and ``iss``.
3. The human is authenticated by the service's own mode (``authenticate_now``: proxy headers, an OIDC login
   redirect, a client certificate).

GET then shows the consent page; POST (the page's form) checks the CSRF token (``app.oauth.consent``) and
redirects with ``error=access_denied`` for ``decision=deny``, else with a fresh ``code``, ``state`` and
``iss`` (RFC 9207). Consents are not remembered: every authorization shows the page (an agent authorizes
rarely, and a remembered consent is one more thing to revoke).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from flask import Response, render_template, request, url_for

from app.auth.identity import Identity
from app.http.auth import authenticate_now
from app.oauth import consent
from app.oauth.clients import OAuthClient, UnknownClient
from app.oauth.forms import OAuthError, form_params, query_params
from app.oauth.server import OAuthServer, current_server
from app.oauth.tokens import valid_challenge

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# The consent page's CSP: the site's own, but its form may end in a redirect to the client's redirect URI
# (https, or loopback http for native agents), which browsers check against form-action.
CONSENT_CSP = {"default-src": "'self'", "img-src": "'self' data:", "style-src": "'self'", "script-src": "'self'",
               "frame-ancestors": "'none'", "base-uri": "'none'",
               "form-action": "'self' https: http://127.0.0.1:* http://localhost:* http://[::1]:*"}
MAX_STATE = 1024


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    client: OAuthClient
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str


class PageError(Exception):
    """Shown as an HTML page: the redirect URI cannot be trusted (or the request is unreadable)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


class RedirectError(Exception):
    def __init__(self, error: str, description: str, redirect_uri: str, state: str | None) -> None:
        super().__init__(description)
        self.error, self.description, self.redirect_uri, self.state = error, description, redirect_uri, state


def parse_request(server: OAuthServer, params: dict[str, str]) -> AuthorizationRequest:
    client_id = params.get("client_id", "")
    if not client_id:
        raise PageError("The request names no client (client_id is missing).")
    try:
        client = server.lookup_client(client_id)
    except UnknownClient as exc:
        raise PageError(f"Unknown client: {exc}") from None
    redirect_uri = params.get("redirect_uri", "")
    if not redirect_uri:
        raise PageError("The request has no redirect_uri.")
    if redirect_uri not in client.redirect_uris:
        raise PageError("The redirect_uri is not one this client registered.")
    state = params.get("state")
    if state is not None and len(state) > MAX_STATE:
        raise PageError(f"The state parameter is longer than {MAX_STATE} characters.")

    def refuse(error: str, description: str) -> RedirectError:
        return RedirectError(error, description, redirect_uri, state)

    if params.get("response_type") != "code":
        raise refuse("unsupported_response_type", "only response_type=code is supported")
    if "authorization_code" not in client.grant_types:
        raise refuse("unauthorized_client", "the client did not register the authorization_code grant")
    challenge, method = params.get("code_challenge"), params.get("code_challenge_method")
    if not challenge:
        raise refuse("invalid_request", "PKCE is required: code_challenge is missing")
    if method != "S256":
        raise refuse("invalid_request", "code_challenge_method must be S256")
    if not valid_challenge(challenge):
        raise refuse("invalid_request", "code_challenge is not a base64url SHA-256 (43 characters)")
    canonical = server.issuer.resource
    resource = params.get("resource")
    if resource is None or resource == "":
        if server.settings.mcp_require_resource_indicator:
            raise refuse("invalid_request", f"the resource parameter is required ({canonical})")
        resource = canonical
    if resource != canonical:
        raise refuse("invalid_target", f"the only resource here is {canonical}")
    return AuthorizationRequest(client, redirect_uri, state, challenge, resource)


def redirect_back(server: OAuthServer, redirect_uri: str, values: dict[str, str | None]) -> Response:
    """A 302 to the (checked) redirect URI, its own query kept, with ``values`` and ``iss`` added."""
    parts = urlsplit(redirect_uri)
    added = urlencode({**{k: v for k, v in values.items() if v is not None}, "iss": server.issuer.url})
    location = urlunsplit(parts._replace(query=f"{parts.query}&{added}" if parts.query else added))
    return Response(status=302, headers={"Location": location, **NO_STORE})


def error_page(message: str, status: int = 400) -> Response:
    html = render_template("oauth/error.html", message=message)
    return Response(html, status, mimetype="text/html", headers=NO_STORE)


def _checked(params_of: str) -> tuple[OAuthServer, AuthorizationRequest, dict[str, str]] | Response:
    server = current_server()
    try:
        params = query_params(request) if params_of == "query" else form_params(request)
        return server, parse_request(server, params), params
    except OAuthError as exc:
        return error_page(f"The request is not readable: {exc.description}.", 413 if exc.status == 413 else 400)
    except PageError as exc:
        return error_page(exc.message, exc.status)
    except RedirectError as exc:
        return redirect_back(server, exc.redirect_uri, {"error": exc.error, "error_description": exc.description,
                                                        "state": exc.state})


def authorize_get() -> Response:
    checked = _checked("query")
    if isinstance(checked, Response):
        return checked
    server, req, _ = checked
    identity = authenticate_now()
    nonce = consent.cookie_nonce(request) or consent.new_nonce()
    token = consent.csrf_token(server.key(), nonce, identity.subject, req.client.client_id, req.redirect_uri,
                               req.code_challenge)
    response = Response(_consent_page(req, identity, token), 200, mimetype="text/html", headers=NO_STORE)
    consent.set_cookie(response, nonce, _cookie_path(), secure=server.issuer.secure or request.is_secure)
    return response


def authorize_post() -> Response:
    checked = _checked("form")
    if isinstance(checked, Response):
        return checked
    server, req, params = checked
    identity = authenticate_now()
    if not consent.csrf_valid(server.key(), request, params.get(consent.FIELD), identity.subject,
                              req.client.client_id, req.redirect_uri, req.code_challenge):
        return error_page("The consent form was not accepted (missing or invalid CSRF token, or no consent "
                          "cookie). Start the authorization again from the agent.")
    if params.get("decision") == "deny":
        return redirect_back(server, req.redirect_uri, {"error": "access_denied",
                                                        "error_description": "the user refused the authorization",
                                                        "state": req.state})
    code = server.codes.issue(req.client.client_id, req.redirect_uri, req.code_challenge, req.resource,
                              identity.subject, identity.groups,
                              refresh="refresh_token" in req.client.grant_types)
    return redirect_back(server, req.redirect_uri, {"code": code, "state": req.state})


def _consent_page(req: AuthorizationRequest, identity: Identity, token: str) -> str:
    hidden = {"response_type": "code", "client_id": req.client.client_id, "redirect_uri": req.redirect_uri,
              "code_challenge": req.code_challenge, "code_challenge_method": "S256", "resource": req.resource,
              consent.FIELD: token}
    if req.state is not None:
        hidden["state"] = req.state
    redirect_host = urlsplit(req.redirect_uri).netloc or req.redirect_uri
    return render_template("oauth/consent.html", client=req.client,
                           client_name=req.client.client_name or req.client.client_id,
                           verified=req.client.verified, redirect_host=redirect_host, identity=identity,
                           resource=req.resource, hidden=hidden, action=url_for("oauth_authorize"))


def _cookie_path() -> str:
    return request.script_root + "/oauth/"


def authorize() -> Response:
    """The view of ``/oauth/authorize`` (GET, HEAD: the consent page; POST: the decision)."""
    return authorize_post() if request.method == "POST" else authorize_get()


# flask-talisman reads per-view options from the view function (app.http.security sets the site's CSP).
authorize.talisman_view_options = {"content_security_policy": CONSENT_CSP}  # type: ignore[attr-defined]
