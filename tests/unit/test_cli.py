"""The ``shoal`` command: arguments, configuration errors, and the gevent server it builds (TLS, IPv6 and
unix sockets), served in-process and asked over real sockets."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from app import create_app
from app.cli import build_server, main, parse_args, serve, unix_listener
from app.config import ListenAddress, Settings, load_settings
from tests.conftest import free_port
from tests.transport import get_over_unix, make_self_signed

NO_ENGINE = "unix:///nonexistent/docker.sock"  # the runtime is never started here


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a unix socket path is limited to 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="shoal-", dir="/tmp") as name:
        yield Path(name)


@contextmanager
def running(settings: Settings) -> Iterator[object]:
    app = create_app(settings, configure_logging=False)
    server = build_server(app, settings)
    server.start()
    try:
        yield server
    finally:
        server.stop(timeout=2)


# --------------------------------------------------------------------------- arguments
@pytest.mark.parametrize("argv", [["--config", "x.toml"], ["--config=x.toml"], ["-config", "x.toml"],
                                  ["-config=x.toml"]])
def test_the_config_flag_has_a_go_style_alias(argv: list[str]) -> None:
    assert parse_args(argv).config == "x.toml"


def test_without_a_flag_the_config_is_none() -> None:
    assert parse_args([]).config is None


# --------------------------------------------------------------------------- configuration errors
def test_a_bad_value_exits_2_with_one_line_naming_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SERVICE_LISTEN_ADDR", "127.0.0.1")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shoal: configuration error: SERVICE_LISTEN_ADDR (server.listen_addr")
    assert err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--config", "-config"])
def test_a_missing_named_config_file_exits_2_naming_it(flag: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag, str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


def test_the_config_flag_reaches_load_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server]\noperations_level = 7\n")
    monkeypatch.delenv("SERVICE_OPERATIONS_LEVEL", raising=False)
    assert main(["-config", str(path)]) == 2
    assert "server.operations_level" in capsys.readouterr().err


# --------------------------------------------------------------------------- serving
def test_tls_is_served_with_the_configured_cert_and_key(tls_pair: tuple[str, str]) -> None:
    cert, key = tls_pair
    port = free_port()
    settings = load_settings({"SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}", "SERVICE_TLS_CERT": cert,
                              "SERVICE_TLS_KEY": key, "SERVICE_DOCKER_HOST": NO_ENGINE}, search_paths=())
    with running(settings):
        response = requests.get(f"https://127.0.0.1:{port}/-/health", verify=cert, timeout=5,
                                allow_redirects=False)
    assert response.status_code == 200
    assert response.headers["Strict-Transport-Security"] == "max-age=63072000; includeSubDomains"


def test_plain_http_is_served_without_tls() -> None:
    port = free_port()
    settings = Settings(listen_addr=ListenAddress("127.0.0.1", port), docker_host=NO_ENGINE)
    with running(settings):
        response = requests.get(f"http://127.0.0.1:{port}/-/health", timeout=5, allow_redirects=False)
    assert response.status_code == 200
    assert "Strict-Transport-Security" not in response.headers


def test_ipv6_addresses_are_served() -> None:
    port = free_port()
    settings = load_settings({"SERVICE_LISTEN_ADDR": f"[::1]:{port}", "SERVICE_DOCKER_HOST": NO_ENGINE},
                             search_paths=())
    with running(settings) as server:
        assert server.socket.family == socket.AF_INET6  # type: ignore[attr-defined]
        response = requests.get(f"http://[::1]:{port}/-/health", timeout=5)
    assert response.status_code == 200


def test_unix_sockets_are_served(short_dir: Path) -> None:
    path = str(short_dir / "s.sock")
    settings = load_settings({"SERVICE_LISTEN_ADDR": f"unix:{path}", "SERVICE_DOCKER_HOST": NO_ENGINE},
                             search_paths=())
    with running(settings):
        status, body = get_over_unix(path, "/-/health")
    assert status == 200 and b'"Health"' in body


def test_a_stale_unix_socket_file_is_replaced(short_dir: Path) -> None:
    path = str(short_dir / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(path)  # bound, never listening, closed: what a killed process leaves behind
    listener = unix_listener(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
    finally:
        listener.close()


def test_a_live_unix_socket_is_not_taken_over(short_dir: Path) -> None:
    path = str(short_dir / "s.sock")
    first = unix_listener(path)
    try:
        with pytest.raises(OSError, match="another process is listening"):
            unix_listener(path)
    finally:
        first.close()


def test_a_regular_file_at_the_socket_path_is_left_alone(short_dir: Path) -> None:
    path = short_dir / "s.sock"
    path.write_text("keep me")
    with pytest.raises(OSError, match="not a socket"):
        unix_listener(str(path))
    assert path.read_text() == "keep me"


def test_an_address_in_use_exits_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        settings = Settings(listen_addr=ListenAddress("127.0.0.1", port), docker_host=NO_ENGINE)
        assert serve(create_app(settings, configure_logging=False), settings) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"shoal: cannot listen on 127.0.0.1:{port}:") and err.count("\n") == 1


def test_a_failed_tls_handshake_does_not_stop_the_server(tls_pair: tuple[str, str]) -> None:
    cert, key = tls_pair
    port = free_port()
    settings = Settings(listen_addr=ListenAddress("127.0.0.1", port), tls_cert=cert, tls_key=key,
                        docker_host=NO_ENGINE)
    with running(settings):
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/-/health", timeout=5)  # plain HTTP on the HTTPS port
        response = requests.get(f"https://127.0.0.1:{port}/-/health", verify=cert, timeout=5)
    assert response.status_code == 200

