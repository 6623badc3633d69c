"""Cross-site request forgery: a write riding on a browser's cookie session must come from this service's
own pages (or a configured CORS origin).

Why a check of ``Origin`` and no token: the dashboard's writes are ``fetch`` calls, and browsers send
``Origin`` on every non-GET ``fetch`` and form post (and ``Sec-Fetch-Site`` on all of them), which a page on
another site cannot forge. The session cookie is ``SameSite=Lax`` as well (``app.auth.oidc_cookies``), so
browsers leave it off cross-site subresource requests and form posts already; this check is the second
line, for browsers or setups where Lax does not hold (same-site sibling hosts, older browsers).

The rule (docs/dashboard-actions.md): an unsafe request (POST, PUT, PATCH, DELETE) that carries a cookie
session and no ``Authorization`` header (with one, the header authenticates and the cookie is ignored) passes
only when its ``Origin`` is this service's own (the request's ``Host``, or the origin of
``auth.oidc.redirect_url``: the public address behind a proxy) or a ``server.cors.origins`` entry, or when it
has no ``Origin`` but ``Sec-Fetch-Site: same-origin``; else 403 ``AUT005``, before authentication and before
anything is read or written. A cookie session is the OIDC session cookie in auth mode ``oidc``, and any
cookie in mode ``headers`` (the front proxy's session is invisible to Shoal by name). Requests without
cookies (API clients with bearer tokens, client certificates, proxy headers) are not affected.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, current_app, request

from app.errors import ProblemError
from app.http.cors import CorsPolicy, is_same_origin
from app.runtime import runtime_of

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Cookies that are not a session: the consent page's own CSRF nonce (app.oauth.consent).
NOT_SESSIONS = frozenset({"shoal_oauth_csrf"})


def _session_cookie_names(app: Flask) -> frozenset[str]:
    """The OIDC provider's session cookie name (``__Host-`` prefixed under TLS); none in other modes."""
    from app.auth.oidc_cookies import SESSION
    from app.http.auth import provider_of

    cookies = getattr(provider_of(app), "cookies", None)
    names = getattr(cookies, "names", None)
    return frozenset({names[SESSION]}) if isinstance(names, dict) and SESSION in names else frozenset()


def carries_cookie_session(mode: str, cookie_names: frozenset[str], cookies: dict[str, str]) -> bool:
    """Whether the request's cookies are a browser session of auth mode ``mode``."""
    if mode == "oidc":
        return any(name in cookies for name in cookie_names)
    if mode == "headers":
        return any(name not in NOT_SESSIONS for name in cookies)
    return False


def public_origin(url: str | None) -> str | None:
    """``scheme://host[:port]`` of a configured URL (the OIDC redirect URL), lower-case; None when unset."""
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def origin_allowed(origin: str | None, fetch_site: str | None, host: str, own: str | None,
                   cors: CorsPolicy) -> bool:
    """The request comes from this service's pages or a configured CORS origin."""
    if origin is None:
        return (fetch_site or "").strip().lower() == "same-origin"
    if origin == "null":
        return False
    if is_same_origin(origin, host) or (own is not None and origin.lower().rstrip("/") == own):
        return True
    return cors.origins != ("*",) and cors.allows(origin)   # '*' names no origin: cookies need a listed one


def _check() -> None:
    if request.method not in UNSAFE or not request.cookies or "Authorization" in request.headers:
        return
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    settings = runtime_of(app).settings
    names = _session_cookie_names(app) if settings.auth_mode == "oidc" else frozenset()
    if not carries_cookie_session(settings.auth_mode, names, dict(request.cookies)):
        return
    origin = request.headers.get("Origin")
    if origin_allowed(origin, request.headers.get("Sec-Fetch-Site"), request.host,
                      public_origin(settings.oidc_redirect_url), CorsPolicy.from_settings(settings)):
        return
    shown = "no Origin" if origin is None else f"Origin {origin[:200]}"
    raise ProblemError("AUT005", detail=f"A {request.method} with a session cookie and {shown} is refused: "
                                        "writes with a browser session must come from this service's pages.")


def init_csrf(app: Flask) -> None:
    """Registered before authentication: a forged write is refused before the session is even opened."""
    if runtime_of(app).settings.auth_mode in ("oidc", "headers"):
        app.before_request(_check)
