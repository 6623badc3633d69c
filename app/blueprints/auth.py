"""``/auth/whoami`` and ``/profile`` (docs/auth.md): who the caller is and what it may do.

``/auth/whoami`` is under ``/auth/``, which the authentication hook bypasses (so login flows work without a
session); it authenticates itself with :func:`~app.http.auth.authenticate_now` and answers 401 ``AUT001``
like any protected path. Mode ``none`` answers the anonymous identity. Both carry the caller's effective
grants as ``permissions`` (``{"<resource pattern>": ["read", "write"]}``), absent when no policy is active
(no policy: everything is allowed), and are ``no-store``: they describe one caller.
"""

from __future__ import annotations

from typing import Any

from flask import Response
from flask.views import MethodView
from flask_smorest import Blueprint

from app.acl.evaluator import access_for
from app.blueprints.docs import errors
from app.http import respond
from app.http.auth import authenticate_now
from app.http.jsonld import envelope
from app.http.negotiation import negotiated
from app.runtime import current_runtime
from app.schemas.v1.auth import IdentityV1, ProfileV1

blp = Blueprint("auth", __name__, description="The caller's identity and effective permissions.")
_UNAUTHENTICATED = {401: "No valid credentials (AUT001), with the mode's WWW-Authenticate.",
                    403: "The identity provider refused or failed (AUT002)."}


def _answer(path: str, jsonld_type: str) -> Response:
    identity = authenticate_now()
    runtime = current_runtime()
    body: dict[str, Any] = envelope(respond.base_path(), path, jsonld_type)
    body.update(identity.document())
    access = access_for(identity, runtime.policy.policy, auth_enabled=runtime.settings.auth_mode != "none")
    if not access.unrestricted:
        body["permissions"] = access.permissions()
    return respond.document(body, cache_control="no-store")


@blp.route("/auth/whoami")
class WhoAmI(MethodView):
    @blp.response(200, IdentityV1, description="The caller's identity and its effective permissions "
                                               "(Cache-Control: no-store).")
    @errors(blp, 401, 403, codes=_UNAUTHENTICATED)
    @negotiated()
    def get(self) -> Response:
        return _answer("/auth/whoami", "Identity")


@blp.route("/profile")
class Profile(MethodView):
    @blp.response(200, ProfileV1, description="The caller's identity and permissions map (Cache-Control: "
                                              "no-store).")
    @errors(blp, 401, 403, codes=_UNAUTHENTICATED)
    @negotiated()
    def get(self) -> Response:
        return _answer("/profile", "Profile")
