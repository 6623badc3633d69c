"""Discovery documents: exact members, and the issuer / PRM agreement the MCP SDK client checks, with and
without a base path; the issuer's derivation."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    validate_metadata_issuer,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from app.config import Settings
from app.config.settings import ListenAddress
from app.oauth.issuer import issuer_of
from tests.unit.oauth.test_authorize_support import ISSUER, make_app

AS_MEMBERS = {"issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint", "registration_endpoint",
              "client_id_metadata_document_supported", "code_challenge_methods_supported",
              "grant_types_supported", "response_types_supported", "token_endpoint_auth_methods_supported",
              "revocation_endpoint_auth_methods_supported", "authorization_response_iss_parameter_supported"}


def test_authorization_server_metadata_has_exactly_the_profile_members() -> None:
    response = make_app().test_client().get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "max-age=3600"
    body = response.get_json()
    assert set(body) == AS_MEMBERS
    assert body == {
        "issuer": ISSUER, "authorization_endpoint": ISSUER + "/oauth/authorize",
        "token_endpoint": ISSUER + "/oauth/token", "revocation_endpoint": ISSUER + "/oauth/revoke",
        "registration_endpoint": ISSUER + "/oauth/register", "client_id_metadata_document_supported": True,
        "code_challenge_methods_supported": ["S256"], "grant_types_supported": ["authorization_code", "refresh_token"],
        "response_types_supported": ["code"], "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"], "authorization_response_iss_parameter_supported": True}


def test_registration_and_documents_follow_their_switches() -> None:
    body = make_app(mcp_dcr_enabled=False, mcp_cimd_enabled=False).test_client().get(
        "/.well-known/oauth-authorization-server").get_json()
    assert "registration_endpoint" not in body
    assert body["client_id_metadata_document_supported"] is False


def test_openid_configuration_is_the_same_document() -> None:
    client = make_app().test_client()
    assert client.get("/.well-known/openid-configuration").get_json() == \
        client.get("/.well-known/oauth-authorization-server").get_json()


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_protected_resource_metadata(path: str) -> None:
    response = make_app().test_client().get(path)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "max-age=3600"
    assert response.get_json() == {"resource": ISSUER + "/mcp", "authorization_servers": [ISSUER],
                                   "bearer_methods_supported": ["header"], "resource_documentation": ISSUER + "/api"}


def _served(client: Any, url: str, base_path: str) -> dict[str, Any] | None:
    """The JSON at ``url`` as the app behind its base path shim answers it (None: not served)."""
    response = client.get(urlsplit(url).path)
    return response.get_json() if response.status_code == 200 else None


@pytest.mark.parametrize("base_path", ["", "/shoal"])
def test_the_sdk_client_discovers_consistent_documents(base_path: str) -> None:
    """Run the SDK client's own discovery rules over the served documents: PRM found from the challenge
    URL, the AS metadata found at one of the URLs it tries, issuer equal as a string, resource allowed."""
    app = make_app(base_path=base_path)
    client = app.test_client()
    server_url = f"{ISSUER}{base_path}/mcp"
    challenge_url = f"{ISSUER}{base_path}/.well-known/oauth-protected-resource"
    prm_doc = next(doc for url in build_protected_resource_metadata_discovery_urls(challenge_url, server_url)
                   if (doc := _served(client, url, base_path)) is not None)
    prm = ProtectedResourceMetadata.model_validate(prm_doc)
    assert str(prm.resource) == server_url
    assert check_resource_allowed(resource_url_from_server_url(server_url), str(prm.resource))
    issuer = str(prm.authorization_servers[0])
    assert issuer == ISSUER + base_path
    metadata_doc = next(doc for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url)
                        if (doc := _served(client, url, base_path)) is not None)
    metadata = OAuthMetadata.model_validate(metadata_doc)
    validate_metadata_issuer(metadata, issuer)   # raises on any difference, a trailing slash included
    assert str(metadata.authorization_endpoint) == f"{ISSUER}{base_path}/oauth/authorize"


def test_outside_the_base_path_nothing_is_served() -> None:
    client = make_app(base_path="/shoal").test_client()
    assert client.get("/.well-known/oauth-authorization-server").status_code == 404


@pytest.mark.parametrize(("values", "issuer"), [
    ({"mcp_issuer": "https://agents.example/x"}, "https://agents.example/x"),
    ({"mcp_issuer": "https://agents.example", "base_path": "/shoal"}, "https://agents.example/shoal"),
    ({"external_url": "https://proxy.example/pre", "base_path": "/b"}, "https://proxy.example/pre/b"),
    ({"listen_addr": ListenAddress("127.0.0.1", 8080)}, "http://127.0.0.1:8080"),
    ({"listen_addr": ListenAddress("0.0.0.0", 80)}, "http://localhost"),
    ({"listen_addr": ListenAddress("::1", 9000)}, "http://[::1]:9000"),
    ({"listen_addr": ListenAddress("10.0.0.5", 443), "tls_cert": "c.pem", "tls_key": "k.pem"}, "https://10.0.0.5"),
    ({"listen_addr": ListenAddress(unix_path="/run/s.sock")}, "http://localhost"),
])
def test_issuer_derivation(values: dict[str, Any], issuer: str) -> None:
    derived = issuer_of(Settings(**values))
    assert derived.url == issuer
    assert derived.resource == issuer + "/mcp"
    assert derived.resource_metadata == issuer + "/.well-known/oauth-protected-resource"
