"""OAuth client registration on the real server: gunicorn (gevent worker) following the lab swarm, the agent
endpoint on with ``auth.mode = headers`` behind a trusted proxy (127.0.0.1), a state store of its own.

Shows what only the real stack shows: the per-address limit counts the client a trusted proxy forwards in
``X-Forwarded-For``, the cap evicts the least recently used, and registrations are in the state store's
file and still known after a restart (the authorize page tells a known client from an unknown one).

The OAuth endpoints answer in OAuth's own JSON shapes (RFC 7591 errors), not the ``/api`` document's
problems, so this server's base is taken out of the OpenAPI response check.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import OPENAPI, free_port, gunicorn_env, launch_gunicorn, stop_gunicorn

REDIRECT = "http://127.0.0.1:33418/callback"


@dataclass
class Running:
    base: str
    proc: subprocess.Popen[bytes]
    log: Path


def _start(docker_host: str, data_dir: Path, log: Path) -> Running:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = gunicorn_env(docker_host, port, SERVICE_MCP="true", SERVICE_AUTH_MODE="headers",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1/32", SERVICE_AUTH_HEADERS_SUBJECT="X-User",
                       SERVICE_MCP_DCR_RATE_LIMIT="2", SERVICE_MCP_DCR_MAX_CLIENTS="3",
                       SERVICE_DATA_DIR=str(data_dir))
    proc = launch_gunicorn(env, log, base)
    OPENAPI.bases.discard(base)
    return Running(base, proc, log)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oauth-state")


@pytest.fixture(scope="module")
def server(docker_host: str, state: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = _start(docker_host, state, tmp_path_factory.mktemp("oauth-gunicorn") / "server.log")
    yield running
    if running.proc.poll() is None:
        stop_gunicorn(running.proc, running.log)


def register(base: str, forwarded: str | None = None, **members: Any) -> requests.Response:
    headers = {} if forwarded is None else {"X-Forwarded-For": forwarded}
    body = {"client_name": "Live agent", "redirect_uris": [REDIRECT], "application_type": "native", **members}
    return requests.post(f"{base}/oauth/register", json=body, headers=headers, timeout=10)


def authorize_page(base: str, client_id: str) -> str:
    """The authorize page for ``client_id`` with a redirect URI no client registered: an unknown client
    and a known one get different refusals."""
    response = requests.get(f"{base}/oauth/authorize", params={
        "response_type": "code", "client_id": client_id, "redirect_uri": "https://unregistered.example/cb",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256",
        "state": "s"}, headers={"X-User": "alice"}, allow_redirects=False, timeout=10)
    return response.text


def test_a_registration_is_a_public_client(server: Running) -> None:
    response = register(server.base, "203.0.113.1")
    assert response.status_code == 201, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none" and "client_secret" not in body
    assert body["redirect_uris"] == [REDIRECT] and body["client_id"]
    refused = register(server.base, "203.0.113.1", token_endpoint_auth_method="client_secret_basic")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"
    bad = register(server.base, "203.0.113.1", redirect_uris=["http://evil.example/cb"])
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"


def test_the_limit_counts_the_client_the_trusted_proxy_forwards(server: Running) -> None:
    """Rate limit 2 per hour: the third from one forwarded client is refused, whatever the client wrote
    left of the proxy's entry; another forwarded client is not."""
    assert register(server.base, "198.51.100.10").status_code == 201
    assert register(server.base, "6.6.6.6, 198.51.100.10").status_code == 201
    refused = register(server.base, "7.7.7.7, 198.51.100.10")
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_requests"
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3600
    assert register(server.base, "198.51.100.11").status_code == 201


def test_the_cap_evicts_and_a_restart_keeps_the_rest(server: Running, docker_host: str, state: Path,
                                                     tmp_path: Path) -> None:
    """Cap 3: after four more registrations the oldest of them is gone; the three newest are in the state
    store's file once the server stopped, and a new server on that file still knows them."""
    ids = [register(server.base, f"192.0.2.{n}").json()["client_id"] for n in range(1, 5)]
    assert "Unknown client" in authorize_page(server.base, ids[0])
    assert "not one this client registered" in authorize_page(server.base, ids[3])
    stop_gunicorn(server.proc, server.log)
    with sqlite3.connect(state / "shoal.db") as db:
        stored = {row[0] for row in db.execute("SELECT client_id FROM oauth_clients")}
    assert stored == set(ids[1:])
    again = _start(docker_host, state, tmp_path / "again.log")
    try:
        for client_id in ids[1:]:
            assert "not one this client registered" in authorize_page(again.base, client_id)
        assert "Unknown client" in authorize_page(again.base, ids[0])
    finally:
        stop_gunicorn(again.proc, again.log)
