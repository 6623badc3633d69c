"""Security headers on every response, errors included (flask-talisman).

HSTS is sent only when the service itself terminates TLS (over HTTP it is meaningless). HTTPS is never
forced by redirect: with TLS on, the server speaks only TLS, so no plain request arrives, and talisman's
redirect would be an absolute URL built from the client's ``Host``.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app, request
from flask_talisman import Talisman
from werkzeug.datastructures import Headers

CSP = {"default-src": "'self'", "img-src": "'self' data:", "style-src": "'self'", "script-src": "'self'",
       "frame-ancestors": "'none'", "base-uri": "'self'", "form-action": "'self'"}


HSTS_MAX_AGE = 63072000  # two years: the header is exactly "max-age=63072000; includeSubDomains"
REFERRER_POLICY = "strict-origin-when-cross-origin"


def security_headers(*, tls: bool) -> list[tuple[str, str]]:
    """The headers talisman adds to every response, for answers written outside Flask (the server's own
    errors, ``app.http.server_errors``); a unit test keeps the two equal."""
    headers = [("Permissions-Policy", "browsing-topics=()"), ("X-Frame-Options", "DENY"),
               ("X-Content-Type-Options", "nosniff"),
               ("Content-Security-Policy", "; ".join(f"{k} {v}" for k, v in CSP.items())),
               ("Referrer-Policy", REFERRER_POLICY)]
    if tls:
        headers.append(("Strict-Transport-Security", f"max-age={HSTS_MAX_AGE}; includeSubDomains"))
    return headers


class CompiledTalisman(Talisman):  # type: ignore[misc]  # flask-talisman is untyped
    """Talisman's headers, made once per variant instead of per request: with no per-view options they
    depend only on whether the request came over HTTPS (HSTS). Talisman re-read its options, parsed the
    CSP and set seven headers one by one on every answer (15 % of a small read's time). A view with its
    own ``talisman_view_options`` (the OAuth consent page) still goes through Talisman itself."""

    def __init__(self, app: Flask, **options: Any) -> None:
        self._compiled: dict[bool, list[tuple[str, str]]] = {}
        self._plain: dict[str | None, bool] = {}   # endpoint → no options of its own (three asks a request)
        super().__init__(app, **options)

    def _plain_view(self) -> bool:
        endpoint = request.endpoint
        plain = self._plain.get(endpoint)
        if plain is None:
            view = current_app.view_functions.get(endpoint) if endpoint else None
            plain = self._plain[endpoint] = not hasattr(view, "talisman_view_options")
        return plain

    def _force_https(self) -> Any:
        if not self.force_https and self._plain_view():
            return None
        return super()._force_https()

    def _make_nonce(self) -> None:
        if not self.content_security_policy_nonce_in and self._plain_view():
            return
        super()._make_nonce()

    def _set_response_headers(self, response: Any) -> Any:
        if not self._plain_view():
            return super()._set_response_headers(response)
        secure = request.is_secure or request.headers.get("X-Forwarded-Proto", "http") == "https"
        compiled = self._compiled.get(secure)
        if compiled is None:
            scratch = Headers()
            super()._set_response_headers(_Scratch(scratch))
            compiled = self._compiled[secure] = list(scratch.items())
        headers = response.headers
        for name, value in compiled:
            headers[name] = value
        return response


class _Scratch:
    """A stand-in response whose headers receive what Talisman would set."""

    def __init__(self, headers: Headers) -> None:
        self.headers = headers


def init_security(app: Flask, *, tls: bool) -> None:
    CompiledTalisman(app, force_https=False, strict_transport_security=tls,
             strict_transport_security_max_age=HSTS_MAX_AGE, strict_transport_security_include_subdomains=True,
             strict_transport_security_preload=False,
             frame_options="DENY", content_security_policy=CSP,
             referrer_policy=REFERRER_POLICY, session_cookie_secure=tls)
