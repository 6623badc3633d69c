"""``auth.mode = oidc``: browser sessions from an OpenID Connect login, and bearer tokens for machines.

Browsers: ``/auth/login`` starts an authorization-code flow with PKCE (S256), a ``state`` and a ``nonce``
kept in a signed flow cookie for 300 s; ``/auth/callback`` checks them (and the RFC 9207 ``iss``
parameter when sent), exchanges the code (authlib's requests client), verifies the ID token and sets a
signed session cookie holding only the identity, for min(8 h, the ID token's lifetime). ``POST
/auth/logout`` clears it. Machines send ``Authorization: Bearer <ID token or JWT access token>``, checked
against the provider's keys (``app.auth.oidc_tokens``). The routes themselves are ``app.blueprints.oidc``.

Failures: no or bad credentials → ``AuthenticationFailed`` (401 ``AUT001``, ``WWW-Authenticate: Bearer``,
``error="invalid_token"`` for a rejected token), except that a browser asking for ``text/html`` without a
valid session is sent to the login (``LoginRequired``); a provider that cannot be reached →
``ProviderRefused`` (403 ``AUT002``). Tokens, codes and cookie values never reach a log or a problem detail.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import time
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

from flask import Flask, Request, Response, g, redirect
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response as WerkzeugResponse

from app.auth.identity import AuthenticationFailed, Identity, LoginRequired, ProviderRefused
from app.auth.oidc_claims import identity_from_claims, identity_from_dict, identity_to_dict
from app.auth.oidc_cookies import FLOW, SESSION, CookieInvalid, SignedCookies
from app.auth.oidc_discovery import TIMEOUT, Discovery, ProviderUnavailable
from app.auth.oidc_tokens import TokenRejected, TokenVerifier
from app.config import Settings
from app.errors import ProblemError
from app.http.formats import requested_format
from app.http.negotiation import wants_html

log = logging.getLogger(__name__)

FLOW_LIFETIME = 300            # seconds a login may take between /auth/login and /auth/callback
SESSION_LIFETIME = 8 * 3600    # at most; less when the ID token expires sooner
CHALLENGE = "Bearer"
_SAFE_ERROR = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CONTROL = re.compile(r"[\x00-\x20\x7f\\]")
_G_CLEAR = "oidc_clear_cookies"
MAX_REVOKED = 10_000           # logged-out sessions remembered (the oldest are forgotten first)


class RevokedSessions:
    """Session ids ended by a logout, until the latest time such a session could still be valid: a copy
    of the cookie is refused afterwards. In memory (one worker): a restart forgets them."""

    def __init__(self, cap: int = MAX_REVOKED) -> None:
        self._until: dict[str, float] = {}
        self._cap = cap

    def add(self, sid: str, until: float) -> None:
        now = time.time()
        for old in [key for key, end in self._until.items() if end <= now]:
            del self._until[old]
        while len(self._until) >= self._cap:
            del self._until[next(iter(self._until))]
        self._until[sid] = until

    def __contains__(self, sid: object) -> bool:
        return isinstance(sid, str) and self._until.get(sid, 0.0) > time.time()


def safe_redirect(value: str | None, base_path: str) -> str:
    """Where to go after the login: a path on this service (query kept), resolved under the base path;
    anything else (absolute or scheme-relative URLs, backslashes, control characters) → the base path."""
    home = f"{base_path}/"
    if not value or len(value) > 2048 or not value.startswith("/") or value.startswith("//"):
        return home
    if _CONTROL.search(value):
        return home
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return home
    if base_path and not (value == base_path or value.startswith(base_path + "/")
                          or value.startswith(base_path + "?")):
        value = base_path + value
    return value


def _quoted(reason: str) -> str:
    """A reason inside a quoted-string of WWW-Authenticate (no quotes or backslashes in it)."""
    return reason.replace('"', "'").replace("\\", "/")


class OidcProvider:
    mode = "oidc"

    def __init__(self, settings: Settings, *, discovery: Discovery | None = None) -> None:
        if not (settings.oidc_issuer and settings.oidc_client_id and settings.oidc_client_secret
                and settings.oidc_redirect_url):
            raise ValueError("auth.mode = oidc needs auth.oidc.issuer, client_id, client_secret and redirect_url")
        self.settings = settings
        self.base_path = settings.base_path
        self.client_id = settings.oidc_client_id
        self._client_secret = settings.oidc_client_secret
        self.redirect_url = settings.oidc_redirect_url
        self.discovery = discovery or Discovery(settings.oidc_issuer)
        self.verifier = TokenVerifier(self.discovery, self.client_id)
        key = settings.oidc_session_key or secrets.token_bytes(32)   # random: sessions end with the process
        self.cookies = SignedCookies(key, secure=settings.tls_enabled)
        self.revoked = RevokedSessions()

    # ------------------------------------------------------------------ Provider protocol
    def init_app(self, app: Flask) -> None:
        """Clears cookies that were refused (a tampered or expired session, a spent login flow), and keeps
        the callback's code and state out of the server's access log."""
        app.after_request(self._clear_refused_cookies)

    def authenticate(self, request: Request) -> Identity:
        authorization = request.headers.get("Authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthenticationFailed("Only Authorization: Bearer <token> is accepted here.", CHALLENGE)
            return self._bearer(token.strip())
        value = self.cookies.read(SESSION, request.cookies)
        if value is None:
            self._unauthenticated(request, "No credentials: log in at /auth/login, or send "
                                           "Authorization: Bearer <token>.")
        try:
            payload = self.cookies.open(SESSION, value)
            if payload.get("sid") in self.revoked:
                raise CookieInvalid("the session has been logged out")
            return identity_from_dict(payload)
        except (CookieInvalid, ValueError) as exc:
            g.setdefault(_G_CLEAR, set()).add(SESSION)
            reason = str(exc) if isinstance(exc, CookieInvalid) else "the session cookie is malformed"
            self._unauthenticated(request, f"The session is not valid ({reason}): log in again.")

    def _bearer(self, token: str) -> Identity:
        try:
            claims = self.verifier.verify(token)
        except TokenRejected as exc:
            raise AuthenticationFailed(f"The bearer token was refused: {exc.reason}.",
                                       f'{CHALLENGE} error="invalid_token", '
                                       f'error_description="{_quoted(exc.reason)}"') from None
        except ProviderUnavailable as exc:
            log.warning("oidc: cannot verify a bearer token, the provider is unavailable: %s", exc)
            raise ProviderRefused(f"The identity provider cannot be reached to verify the token ({exc}).") from None
        return identity_from_claims(claims, self.settings.acl_oidc_claim)

    def _unauthenticated(self, request: Request, detail: str) -> NoReturn:
        """A browser asking for a page goes to the login; anything else is a 401."""
        fmt = requested_format(request.environ)
        if request.method in ("GET", "HEAD") and wants_html(request.accept_mimetypes, fmt):
            here = request.script_root + request.path + (f".{fmt}" if fmt else "")
            query = request.query_string.decode("latin-1")
            target = here + (f"?{query}" if query else "")
            raise LoginRequired(f"{self.base_path}/auth/login?redirect={quote(target, safe='/')}")
        raise AuthenticationFailed(detail, CHALLENGE)

    # ------------------------------------------------------------------ the login flow (app.blueprints.oidc)
    def _metadata(self) -> dict[str, Any]:
        try:
            return self.discovery.metadata()
        except ProviderUnavailable as exc:
            log.warning("oidc: the provider's discovery document is unavailable: %s", exc)
            raise ProblemError("AUT002", detail=f"The identity provider cannot be reached ({exc}).") from None

    def _client(self, **kwargs: Any) -> Any:
        from authlib.integrations.requests_client import OAuth2Session

        return OAuth2Session(self.client_id, redirect_uri=self.redirect_url, **kwargs)

    def begin_login(self, redirect_to: str | None) -> WerkzeugResponse:
        """302 to the provider's authorization endpoint, with the flow (state, nonce, verifier) in a cookie."""
        metadata = self._metadata()
        state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
        with self._client(scope=" ".join(self.settings.oidc_scopes), code_challenge_method="S256") as client:
            url, _ = client.create_authorization_url(str(metadata["authorization_endpoint"]), state=state,
                                                     nonce=nonce, code_verifier=verifier)
        flow = {"state": state, "nonce": nonce, "verifier": verifier,
                "next": safe_redirect(redirect_to, self.base_path)}
        response = redirect(url, 302)
        self.cookies.set(response, FLOW, self.cookies.seal(FLOW, flow, time.time() + FLOW_LIFETIME), FLOW_LIFETIME)
        response.headers["Cache-Control"] = "no-store"
        return response

    def finish_login(self, args: Any, cookies: Any) -> WerkzeugResponse:
        """The callback: checks, code exchange, ID token, session cookie, 302 to the saved path."""
        g.setdefault(_G_CLEAR, set()).add(FLOW)   # the flow is spent, whatever happens next
        try:
            flow = self.cookies.open(FLOW, self.cookies.read(FLOW, cookies))
        except CookieInvalid as exc:
            raise ProblemError("AUT003", detail=f"No login in progress ({exc}): start again at /auth/login.") \
                from None
        error = args.get("error")
        if error:
            shown = error if _SAFE_ERROR.fullmatch(error) else "unknown"
            log.info("oidc: the provider refused a login: %s", shown)
            raise ProblemError("AUT002", detail=f"The identity provider refused the login ({shown}).")
        state = args.get("state") or ""
        if not isinstance(flow.get("state"), str) or not hmac.compare_digest(state, flow["state"]):
            raise ProblemError("AUT003", detail="The state does not match this browser's login: start again.")
        metadata = self._metadata()
        issuer = args.get("iss")
        if issuer is not None and issuer != metadata["issuer"]:
            raise ProblemError("AUT003", detail="The callback's iss is not the configured issuer.")
        code = args.get("code")
        if not code:
            raise ProblemError("AUT003", detail="The callback carries no authorization code.")
        tokens = self._exchange(metadata, code, str(flow.get("verifier", "")))
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise ProblemError("AUT002", detail="The identity provider returned no ID token (is the openid scope "
                                                "granted to this client?).")
        try:
            claims = self.verifier.verify(id_token, nonce=str(flow.get("nonce", "")))
        except TokenRejected as exc:
            log.warning("oidc: an ID token was refused at the callback: %s", exc.reason)
            raise ProblemError("AUT003", detail=f"The ID token was refused: {exc.reason}.") from None
        except ProviderUnavailable as exc:
            raise ProblemError("AUT002", detail=f"The identity provider cannot be reached ({exc}).") from None
        identity = identity_from_claims(claims, self.settings.acl_oidc_claim)
        now = time.time()
        expires = min(now + SESSION_LIFETIME, float(claims["exp"]))
        response = redirect(str(flow.get("next") or f"{self.base_path}/"), 302)
        self.cookies.set(response, SESSION, self._session_value(identity, expires), int(expires - now))
        response.headers["Cache-Control"] = "no-store"
        log.info("oidc: login of subject %s", identity.subject)
        return response

    def _exchange(self, metadata: dict[str, Any], code: str, verifier: str) -> dict[str, Any]:
        from authlib.integrations.requests_client import OAuthError
        from requests import RequestException

        methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        method = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
        try:
            with self._client(client_secret=self._client_secret, token_endpoint_auth_method=method) as client:
                token = client.fetch_token(str(metadata["token_endpoint"]), grant_type="authorization_code",
                                           code=code, code_verifier=verifier, timeout=TIMEOUT)
        except OAuthError as exc:
            shown = exc.error if isinstance(exc.error, str) and _SAFE_ERROR.fullmatch(exc.error) else "error"
            log.warning("oidc: the token endpoint refused the code: %s", shown)
            raise ProblemError("AUT002", detail=f"The identity provider refused the code ({shown}).") from None
        except (RequestException, ValueError) as exc:
            log.warning("oidc: the token endpoint failed: %s", type(exc).__name__)
            raise ProblemError("AUT002", detail="The identity provider's token endpoint failed.") from None
        return dict(token)

    def _session_value(self, identity: Identity, expires: float) -> str:
        payload = {**identity_to_dict(identity), "sid": secrets.token_urlsafe(12)}
        try:
            return self.cookies.seal(SESSION, payload, expires)
        except ValueError:
            payload["raw"] = {}   # too large for a cookie: keep what the ACL needs
        try:
            return self.cookies.seal(SESSION, payload, expires)
        except ValueError as exc:
            raise ProblemError("AUT004", detail=f"The identity is too large for a session cookie ({exc}); "
                                                "reduce the groups or grants claims.") from None

    def logout(self, request: Request) -> WerkzeugResponse:
        """303 to the provider's end-session endpoint (or the base path) with both cookies cleared and the
        session id remembered as ended."""
        if not self._same_origin(request):
            raise Forbidden("Cross-origin logout refused: POST /auth/logout from this service's own pages.")
        try:
            sid = self.cookies.open(SESSION, self.cookies.read(SESSION, request.cookies)).get("sid")
            if isinstance(sid, str):
                self.revoked.add(sid, time.time() + SESSION_LIFETIME)
        except CookieInvalid:
            pass   # no valid session: clearing the cookie is all there is to do
        try:
            end_session = self.discovery.metadata().get("end_session_endpoint")
        except ProviderUnavailable:
            end_session = None   # the local session ends anyway
        if isinstance(end_session, str) and end_session:
            joiner = "&" if urlsplit(end_session).query else "?"
            location = f"{end_session}{joiner}{urlencode({'client_id': self.client_id})}"
        else:
            location = f"{self.base_path}/"
        response = redirect(location, 303)
        self.cookies.clear(response, SESSION)
        self.cookies.clear(response, FLOW)
        response.headers["Cache-Control"] = "no-store"
        return response

    def _same_origin(self, request: Request) -> bool:
        """Fetch metadata first (``Sec-Fetch-Site``), then ``Origin``; a client that sends neither (curl,
        scripts) is not a browser page of another site and may log its own cookie out."""
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        ours = {_origin(self.redirect_url), _origin(request.host_url)}
        return origin.rstrip("/").lower() in ours

    def _clear_refused_cookies(self, response: Response) -> Response:
        for purpose in g.get(_G_CLEAR, ()):
            self.cookies.clear(response, purpose)
        return response


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def make_provider(settings: Settings) -> OidcProvider:
    return OidcProvider(settings)
