"""A small OpenID Provider for tests, built from authlib's server pieces and run on 127.0.0.1.

authlib's Flask ``AuthorizationServer`` with the authorization-code grant, the OpenID Connect code
extension (``authlib.oidc.core.OpenIDCode``, ID tokens signed RS256 with a key published at ``/jwks``)
and PKCE restricted to S256 and required. Storage is in memory. No browser: ``/authorize`` logs in the
user named by ``login_hint``, else :attr:`TestProvider.next_user` (a test hook; ``None`` refuses with
``access_denied``). Also: discovery at ``/.well-known/openid-configuration``, an ``end_session_endpoint``
(``/logout``, which records its calls) and :meth:`TestProvider.mint` for tokens the tests need directly
(expired, signed by another key, other audiences).

Run it with :meth:`TestProvider.start` (a werkzeug server in a thread, free port) and ``stop()``.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import OpenIDCode, UserInfo
from authlib.oidc.core.models import AuthorizationCodeMixin
from flask import Flask, jsonify, request
from joserfc import jwt
from joserfc.jwk import RSAKey
from werkzeug.serving import WSGIRequestHandler, make_server

ACL_CLAIM = "shoal_acl"


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:   # its URLs carry codes: keep them out of logs
        return None


@dataclass
class User:
    sub: str
    name: str
    email: str
    groups: list[str] = field(default_factory=list)
    acl: list[dict[str, Any]] | None = None

    def claims(self) -> dict[str, Any]:
        claims: dict[str, Any] = {"sub": self.sub, "name": self.name, "email": self.email, "groups": self.groups}
        if self.acl is not None:
            claims[ACL_CLAIM] = self.acl
        return claims


USERS = {
    "alice": User("alice-0001", "Alice Example", "alice@example.com", ["engineering", "ops"],
                  [{"resources": ["stack:demo"], "permissions": ["read"]}]),
    "bob": User("bob-0002", "Bob Example", "bob@example.com", []),
}


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        allowed = {"openid", "profile", "email"}
        return " ".join(s for s in (scope or "").split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class Code(AuthorizationCodeMixin):  # type: ignore[misc]
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: User
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    issued: float = field(default_factory=time.time)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return int(self.issued)


class S256Required(CodeChallenge):  # type: ignore[misc]
    """PKCE with S256 only, and a challenge required at the authorization endpoint."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        from authlib.oauth2.rfc6749 import InvalidRequestError

        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("PKCE with code_challenge_method=S256 is required")
        super().validate_code_challenge(grant, redirect_uri)


class TestProvider:
    """The provider; attributes the tests read or set: ``next_user``, ``authorize_requests``,
    ``token_requests``, ``logouts``, ``id_token_lifetime``."""

    __test__ = False   # not a pytest test class

    def __init__(self, client_id: str = "shoal-test", client_secret: str | None = None) -> None:
        self.client_id = client_id
        self.client_secret = client_secret or secrets.token_urlsafe(24)
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key-1", "use": "sig", "alg": "RS256"})
        self.other_key = RSAKey.generate_key(2048, parameters={"kid": "rogue-key", "use": "sig", "alg": "RS256"})
        self.redirect_uris: list[str] = []
        self.next_user: str | None = "alice"
        self.id_token_lifetime = 3600
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests = 0
        self.logouts: list[dict[str, str]] = []
        self.issued_codes: list[str] = []
        self.issued_tokens: list[str] = []
        self._codes: dict[str, Code] = {}
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.issuer = ""
        self.app = self._build_app()

    # ------------------------------------------------------------------ tokens for negative tests
    def mint(self, user: str = "alice", *, expires_in: int = 300, key: RSAKey | None = None, kid: str | None = None,
             aud: str | list[str] | None = None, issuer: str | None = None, **extra: Any) -> str:
        """An ID token as the provider would issue it, with overrides."""
        now = int(time.time())
        claims = {"iss": issuer or self.issuer, "aud": aud if aud is not None else self.client_id, "iat": now,
                  "exp": now + expires_in, **USERS[user].claims(), **extra}
        signing = key or self.key
        header = {"alg": "RS256", "kid": kid if kid is not None else signing.kid}
        token = jwt.encode(header, claims, signing)
        self.issued_tokens.append(token)
        return token

    # ------------------------------------------------------------------ the Flask app
    def _build_app(self) -> Flask:
        app = Flask("test-oidc-provider")
        provider = self

        def query_client(client_id: str) -> Client | None:
            if client_id == provider.client_id:
                return Client(provider.client_id, provider.client_secret, provider.redirect_uris)
            return None

        def save_token(token: dict[str, Any], oauth_request: Any) -> None:
            provider.token_requests += 1
            for name in ("access_token", "id_token"):
                if name in token:
                    provider.issued_tokens.append(token[name])

        class CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

            def save_authorization_code(self, code: str, oauth_request: Any) -> None:
                data = oauth_request.payload.data
                provider._codes[code] = Code(code, oauth_request.client.client_id, oauth_request.payload.redirect_uri,
                                             oauth_request.scope, oauth_request.user, data.get("nonce"),
                                             data.get("code_challenge"), data.get("code_challenge_method"))
                provider.issued_codes.append(code)

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                item = provider._codes.get(code)
                if item and item.client_id == client.client_id and time.time() - item.issued < 60:
                    return item
                return None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                provider._codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: Code) -> User:
                return authorization_code.user

        class IdToken(OpenIDCode):  # type: ignore[misc]
            def exists_nonce(self, nonce: str, oauth_request: Any) -> bool:
                return False

            def resolve_client_private_key(self, client: Client) -> RSAKey:
                return provider.key

            def get_client_algorithm(self, client: Client) -> str:
                return "RS256"

            def get_encode_header(self, client: Client) -> dict[str, str]:
                return {"alg": "RS256", "kid": str(provider.key.kid)}

            def get_client_claims(self, client: Client) -> dict[str, Any]:
                return {"iss": provider.issuer, "aud": [client.get_client_id()],
                        "exp": int(time.time()) + provider.id_token_lifetime}

            def generate_user_info(self, user: User, scope: str) -> UserInfo:
                return UserInfo(user.claims())

        server = AuthorizationServer(app, query_client=query_client, save_token=save_token)
        server.register_grant(CodeGrant, [IdToken(require_nonce=True), S256Required(required=True)])

        @app.get("/.well-known/openid-configuration")
        def discovery() -> Any:
            return jsonify({
                "issuer": provider.issuer,
                "authorization_endpoint": f"{provider.issuer}/authorize",
                "token_endpoint": f"{provider.issuer}/token",
                "jwks_uri": f"{provider.issuer}/jwks",
                "end_session_endpoint": f"{provider.issuer}/logout",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "scopes_supported": ["openid", "profile", "email"],
                "authorization_response_iss_parameter_supported": True,
            })

        @app.get("/jwks")
        def jwks() -> Any:
            return jsonify({"keys": [provider.key.as_dict(private=False)]})

        @app.get("/authorize")
        def authorize() -> Any:
            provider.authorize_requests.append(dict(request.args))
            name = request.args.get("login_hint") or provider.next_user
            user = USERS.get(name) if name else None
            grant = server.get_consent_grant(end_user=user)
            response = server.create_authorization_response(grant_user=user, grant=grant)
            location = response.headers.get("Location")
            if location:   # RFC 9207: say who answers
                from authlib.common.urls import add_params_to_uri

                response.headers["Location"] = add_params_to_uri(location, {"iss": provider.issuer})
            return response

        @app.post("/token")
        def token() -> Any:
            return server.create_token_response()

        @app.get("/logout")
        def logout() -> Any:
            provider.logouts.append(dict(request.args))
            return "logged out", 200, {"Content-Type": "text/plain"}

        return app

    # ------------------------------------------------------------------ running
    def start(self) -> str:
        self._server = make_server("127.0.0.1", 0, self.app, threaded=True, request_handler=_QuietHandler)
        self.issuer = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="test-oidc-provider", daemon=True)
        self._thread.start()
        return self.issuer

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
