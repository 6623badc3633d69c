"""Security headers on every response, errors included (flask-talisman).

HSTS is sent only when the service itself terminates TLS (over HTTP it is meaningless). HTTPS is never
forced by redirect: with TLS on, the server speaks only TLS, so no plain request arrives, and talisman's
redirect would be an absolute URL built from the client's ``Host``.
"""

from __future__ import annotations

from flask import Flask
from flask_talisman import Talisman

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


def init_security(app: Flask, *, tls: bool) -> None:
    Talisman(app, force_https=False, strict_transport_security=tls,
             strict_transport_security_max_age=HSTS_MAX_AGE, strict_transport_security_include_subdomains=True,
             strict_transport_security_preload=False,
             frame_options="DENY", content_security_policy=CSP,
             referrer_policy=REFERRER_POLICY, session_cookie_secure=tls)
