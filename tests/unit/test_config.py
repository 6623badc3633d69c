"""Settings: defaults < TOML < ``_FILE`` < environment; DOCKER_HOST as a default; bad values fail naming
the key; the file search, unknown and not-yet-built keys, and the typed listen address."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import config
from app.config import (
    ConfigError,
    ListenAddress,
    Settings,
    default_search_paths,
    describe_keys,
    keys,
    load_settings,
    loading,
    log_report,
    parse_duration,
)
from app.resources import ResourceKind
from tests.transport import make_self_signed


@pytest.fixture(autouse=True)
def no_search(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Never read a real ./shoal.toml, ~/.shoal.toml or /etc/shoal/shoal.toml."""
    monkeypatch.setattr(loading, "default_search_paths", lambda environ: ())
    yield


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


def write(tmp_path: Path, text: str, name: str = "shoal.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def fails_naming(environ: dict[str, str], *names: str, path: str | None = None) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(environ, path)
    message = str(raised.value)
    assert all(name in message for name in names), message
    return message


# --------------------------------------------------------------------------- defaults and precedence
def test_defaults_without_file_or_environment() -> None:
    settings = load_settings({})
    assert settings == Settings()
    assert settings.listen_addr == ListenAddress("0.0.0.0", 9000)
    assert str(settings.listen_addr) == "0.0.0.0:9000"
    assert settings.base_path == ""
    assert settings.operations_level == 1
    assert settings.self_metrics is True
    assert settings.sse_batch_interval == pytest.approx(0.1)
    assert settings.docker_host == "unix:///var/run/docker.sock"
    assert settings.docker_api_version == "1.41"
    assert (settings.log_level, settings.log_format) == ("info", "json")
    assert (settings.tls_cert, settings.tls_key, settings.tls_enabled) == (None, None, False)
    assert settings.auth_mode == "none"
    assert settings.history_size == 10_000
    assert settings.history_max_bytes == 64 * 1024 * 1024
    assert settings.report == config.LoadReport()


def test_toml_file_sets_values(tmp_path: Path) -> None:
    path = write(tmp_path, """
[server]
listen_addr = "127.0.0.1:8080"
base_path = "shoal/"
operations_level = 2
self_metrics = false
[server.sse]
batch_interval = "250ms"
[docker]
host = "tcp://10.0.0.1:2376"
api_version = "1.45"
[watcher]
task_poll_interval = 2
resync_interval = 60.5
[logging]
level = "WARNING"
format = "text"
""")
    settings = load_settings({}, path)
    assert settings.listen_addr == ListenAddress("127.0.0.1", 8080)
    assert settings.base_path == "/shoal"
    assert settings.operations_level == 2
    assert settings.self_metrics is False
    assert settings.sse_batch_interval == pytest.approx(0.25)
    assert settings.docker_host == "tcp://10.0.0.1:2376"
    assert settings.docker_api_version == "1.45"
    assert (settings.task_poll_interval, settings.resync_interval) == (2.0, 60.5)
    assert (settings.log_level, settings.log_format) == ("warn", "text")
    assert settings.report.config_file == str(Path(path).absolute())


def test_the_config_path_can_come_from_service_config(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 3\n")
    assert load_settings({"SERVICE_CONFIG": path}).operations_level == 3


def test_the_config_flag_wins_over_service_config(tmp_path: Path) -> None:
    flagged = write(tmp_path, "[server]\noperations_level = 2\n", "flag.toml")
    from_env = write(tmp_path, "[server]\noperations_level = 3\n", "env.toml")
    assert load_settings({"SERVICE_CONFIG": from_env}, flagged).operations_level == 2


def test_environment_wins_over_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 2\nlisten_addr = \":1\"\n")
    settings = load_settings({"SERVICE_OPERATIONS_LEVEL": "0"}, path)
    assert settings.operations_level == 0
    assert settings.listen_addr == ListenAddress("0.0.0.0", 1)  # not overridden: the TOML value stays


def test_environment_values_are_parsed() -> None:
    settings = load_settings({"SERVICE_SELF_METRICS": "off", "SERVICE_SSE_BATCH_INTERVAL": "1s",
                              "SERVICE_BASE_PATH": "/ops/shoal/", "SERVICE_PROMETHEUS_URL": "http://prom:9090/",
                              "SERVICE_LOG_LEVEL": "debug", "SERVICE_HISTORY_SIZE": "500"})
    assert settings.self_metrics is False
    assert settings.sse_batch_interval == 1.0
    assert settings.base_path == "/ops/shoal"
    assert settings.prometheus_url == "http://prom:9090"
    assert settings.log_level == "debug"
    assert settings.history_size == 500


@pytest.mark.parametrize(("text", "value"), [("true", True), ("1", True), ("yes", True), ("ON", True),
                                             ("false", False), ("0", False), ("no", False), ("off", False)])
def test_booleans_accept_the_documented_spellings(text: str, value: bool) -> None:
    assert load_settings({"SERVICE_SELF_METRICS": text}).self_metrics is value


# --------------------------------------------------------------------------- <VAR>_FILE
def test_a_file_variable_is_used_when_the_plain_variable_is_unset(tmp_path: Path) -> None:
    (tmp_path / "level").write_text("  3\n")
    assert load_settings({"SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "level")}).operations_level == 3


def test_the_plain_variable_wins_over_its_file_variable(tmp_path: Path) -> None:
    (tmp_path / "level").write_text("3")
    environ = {"SERVICE_OPERATIONS_LEVEL": "2", "SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "level")}
    assert load_settings(environ).operations_level == 2


def test_a_file_variable_wins_over_toml(tmp_path: Path) -> None:
    (tmp_path / "level").write_text("0")
    path = write(tmp_path, "[server]\noperations_level = 2\n")
    assert load_settings({"SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "level")}, path).operations_level == 0


def test_an_unreadable_or_bad_file_variable_fails_naming_it(tmp_path: Path) -> None:
    fails_naming({"SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "absent")}, "SERVICE_OPERATIONS_LEVEL_FILE")
    (tmp_path / "level").write_text("9")
    fails_naming({"SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "level")}, "SERVICE_OPERATIONS_LEVEL_FILE",
                 "server.operations_level")


# --------------------------------------------------------------------------- docker.host and DOCKER_HOST
def test_docker_host_is_the_default_engine_address() -> None:
    assert load_settings({"DOCKER_HOST": "tcp://engine:2375"}).docker_host == "tcp://engine:2375"


def test_service_docker_host_wins_over_docker_host() -> None:
    settings = load_settings({"DOCKER_HOST": "tcp://engine:2375", "SERVICE_DOCKER_HOST": "tcp://manager:2376"})
    assert settings.docker_host == "tcp://manager:2376"


def test_toml_docker_host_wins_over_docker_host(tmp_path: Path) -> None:
    path = write(tmp_path, '[docker]\nhost = "unix:///run/docker.sock"\n')
    assert load_settings({"DOCKER_HOST": "tcp://engine:2375"}, path).docker_host == "unix:///run/docker.sock"


@pytest.mark.parametrize("bad", ["", "/var/run/docker.sock", "tcp://engine", "npipe:////./pipe/docker"])
def test_a_bad_docker_host_fails_naming_it_as_the_default(bad: str) -> None:
    message = fails_naming({"DOCKER_HOST": bad}, "DOCKER_HOST", "docker.host")
    assert "default" in message


@pytest.mark.parametrize("bad", ["", "/var/run/docker.sock"])
def test_a_set_service_docker_host_means_docker_host_is_not_checked(bad: str, tmp_path: Path) -> None:
    environ = {"DOCKER_HOST": bad, "SERVICE_DOCKER_HOST": "unix:///run/docker.sock"}
    assert load_settings(environ).docker_host == "unix:///run/docker.sock"
    path = write(tmp_path, '[docker]\nhost = "tcp://engine:2375"\n')
    assert load_settings({"DOCKER_HOST": bad}, path).docker_host == "tcp://engine:2375"


@pytest.mark.parametrize("host", ["unix:///var/run/docker.sock", "unix:///run/user/1000/docker.sock",
                                  "tcp://10.0.0.1:2376", "tcp://engine.example:2375", "tcp://[::1]:2375",
                                  "tcp://engine:2375/"])
def test_usable_docker_hosts_are_accepted(host: str) -> None:
    assert load_settings({"SERVICE_DOCKER_HOST": host}).docker_host == host


@pytest.mark.parametrize("host", ["unix://", "unix:///", "unix://var/run/docker.sock", "tcp://engine",
                                  "tcp://:2375", "tcp://engine:0", "tcp://engine:70000", "tcp://engine:2375/x",
                                  "tcp://engine:2375?a=b", "http://engine:2375", "docker.sock", "ssh://"])
def test_unusable_docker_hosts_fail_naming_the_key(host: str) -> None:
    fails_naming({"SERVICE_DOCKER_HOST": host}, "docker.host", "SERVICE_DOCKER_HOST")


def test_ssh_docker_hosts_are_refused_without_paramiko(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "_has_paramiko", lambda: False)
    message = fails_naming({"SERVICE_DOCKER_HOST": "ssh://ops@manager"}, "docker.host", "SERVICE_DOCKER_HOST")
    assert "paramiko" in message
    monkeypatch.setattr(keys, "_has_paramiko", lambda: True)
    assert load_settings({"SERVICE_DOCKER_HOST": "ssh://ops@manager"}).docker_host == "ssh://ops@manager"


@pytest.mark.parametrize(("version", "is_ok"), [("1.41", True), ("1.45", True), ("2.0", True), ("1.40", False),
                                                ("1.5", False), ("1", False), ("v1.41", False), ("1.41.0", False),
                                                ("auto", False), ("", False)])
def test_the_api_version_is_checked(version: str, is_ok: bool) -> None:
    if is_ok:
        assert load_settings({"SERVICE_DOCKER_API_VERSION": version}).docker_api_version == version
    else:
        fails_naming({"SERVICE_DOCKER_API_VERSION": version}, "docker.api_version", "SERVICE_DOCKER_API_VERSION")


# --------------------------------------------------------------------------- server.listen_addr
@pytest.mark.parametrize(("text", "address", "bind"), [
    (":9000", ListenAddress("0.0.0.0", 9000), "0.0.0.0:9000"),
    ("0.0.0.0:9000", ListenAddress("0.0.0.0", 9000), "0.0.0.0:9000"),
    ("127.0.0.1:1", ListenAddress("127.0.0.1", 1), "127.0.0.1:1"),
    ("host.name:65535", ListenAddress("host.name", 65535), "host.name:65535"),
    ("localhost:9000", ListenAddress("localhost", 9000), "localhost:9000"),
    ("[::1]:9000", ListenAddress("::1", 9000), "[::1]:9000"),
    ("[::]:9000", ListenAddress("::", 9000), "[::]:9000"),
    ("unix:/path/to.sock", ListenAddress(unix_path="/path/to.sock"), "unix:/path/to.sock"),
    ("unix:///path/to.sock", ListenAddress(unix_path="/path/to.sock"), "unix:/path/to.sock"),
])
def test_listen_addresses_are_parsed_once(text: str, address: ListenAddress, bind: str) -> None:
    parsed = load_settings({"SERVICE_LISTEN_ADDR": text}).listen_addr
    assert parsed == address
    assert str(parsed) == bind
    assert parsed.is_unix is (address.unix_path is not None)
    assert parsed.is_ipv6 is text.startswith("[")


@pytest.mark.parametrize("text", ["", " ", "9000", "127.0.0.1", "127.0.0.1:", ":0", ":65536", ":-1", ":+80",
                                  ":9000x", "::1:9000", "[::1]", "[::1]9000", "[nope]:9000", "[]:9000",
                                  "999.1.1.1:9000", "bad_host:9000", "-host:9000", "a b:9000", "unix:",
                                  "unix:relative.sock", "unix://relative.sock", "unix:/dir/", "tcp://h:1",
                                  "unix:/" + "x" * 120])
def test_bad_listen_addresses_fail_naming_the_key(text: str) -> None:
    fails_naming({"SERVICE_LISTEN_ADDR": text}, "server.listen_addr", "SERVICE_LISTEN_ADDR")


# --------------------------------------------------------------------------- TLS
def test_tls_needs_both_cert_and_key(tls_pair: tuple[str, str]) -> None:
    cert, key = tls_pair
    settings = load_settings({"SERVICE_TLS_CERT": cert, "SERVICE_TLS_KEY": key})
    assert settings.tls_enabled and (settings.tls_cert, settings.tls_key) == (cert, key)
    for environ in ({"SERVICE_TLS_CERT": cert}, {"SERVICE_TLS_KEY": key}):
        with pytest.raises(ConfigError, match=r"tls\.cert.*tls\.key"):
            load_settings(environ)


def test_empty_tls_values_mean_unset(tls_pair: tuple[str, str]) -> None:
    settings = load_settings({"SERVICE_TLS_CERT": "", "SERVICE_TLS_KEY": " "})
    assert (settings.tls_cert, settings.tls_key, settings.tls_enabled) == (None, None, False)
    with pytest.raises(ConfigError, match=r"both or neither"):
        load_settings({"SERVICE_TLS_CERT": tls_pair[0], "SERVICE_TLS_KEY": ""})


def test_a_missing_or_unreadable_tls_file_fails_naming_the_key(tls_pair: tuple[str, str], tmp_path: Path) -> None:
    cert, key = tls_pair
    message = fails_naming({"SERVICE_TLS_CERT": str(tmp_path / "nope.pem"), "SERVICE_TLS_KEY": key},
                           "tls.cert", "SERVICE_TLS_CERT")
    assert "nope.pem" in message
    fails_naming({"SERVICE_TLS_CERT": cert, "SERVICE_TLS_KEY": str(tmp_path)}, "tls.key", "SERVICE_TLS_KEY")
    path = write(tmp_path, f'[tls]\ncert = "{cert}"\nkey = "{tmp_path / "gone.pem"}"\n')
    fails_naming({}, "tls.key", path=path)


def test_a_tls_pair_that_does_not_load_fails_at_start(tls_pair: tuple[str, str], tmp_path: Path) -> None:
    cert, _ = tls_pair
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    fails_naming({"SERVICE_TLS_CERT": cert, "SERVICE_TLS_KEY": str(garbage)}, "tls.cert", "tls.key")


# --------------------------------------------------------------------------- other values
@pytest.mark.parametrize(("environ", "toml_key", "env_key"), [
    ({"SERVICE_OPERATIONS_LEVEL": "5"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_OPERATIONS_LEVEL": "-1"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_OPERATIONS_LEVEL": "two"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "fast"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "0s"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "-5"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "-1s"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "nan"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_WATCHER_RESYNC_INTERVAL": "inf"}, "watcher.resync_interval", "SERVICE_WATCHER_RESYNC_INTERVAL"),
    ({"SERVICE_WATCHER_TASK_POLL_INTERVAL": "0"}, "watcher.task_poll_interval",
     "SERVICE_WATCHER_TASK_POLL_INTERVAL"),
    ({"SERVICE_SELF_METRICS": "maybe"}, "server.self_metrics", "SERVICE_SELF_METRICS"),
    ({"SERVICE_DOCKER_HOST": "/var/run/docker.sock"}, "docker.host", "SERVICE_DOCKER_HOST"),
    ({"SERVICE_LOG_FORMAT": "xml"}, "logging.format", "SERVICE_LOG_FORMAT"),
    ({"SERVICE_LOG_LEVEL": "loud"}, "logging.level", "SERVICE_LOG_LEVEL"),
    ({"SERVICE_AUTH_MODE": "magic"}, "auth.mode", "SERVICE_AUTH_MODE"),
    ({"SERVICE_AUTH_MODE": "tailscale"}, "auth.mode", "SERVICE_AUTH_MODE"),
    ({"SERVICE_TRUSTED_PROXIES": "10.0.0.0/8, nope"}, "server.trusted_proxies", "SERVICE_TRUSTED_PROXIES"),
    ({"SERVICE_AUTH_OIDC_ISSUER": "ftp://id"}, "auth.oidc.issuer", "SERVICE_AUTH_OIDC_ISSUER"),
    ({"SERVICE_AUTH_HEADERS_SUBJECT": "X User"}, "auth.headers.subject", "SERVICE_AUTH_HEADERS_SUBJECT"),
    ({"SERVICE_AUTH_CERT_CA": "/nonexistent/ca.pem"}, "auth.cert.ca", "SERVICE_AUTH_CERT_CA"),
    ({"SERVICE_HISTORY_SIZE": "10"}, "server.history_size", "SERVICE_HISTORY_SIZE"),
    ({"SERVICE_HISTORY_MAX_BYTES": "1000"}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
    ({"SERVICE_HISTORY_MAX_BYTES": "65GiB"}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
    ({"SERVICE_HISTORY_MAX_BYTES": "64 MiBs"}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
    ({"SERVICE_HISTORY_MAX_BYTES": "-64MiB"}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
    ({"SERVICE_HISTORY_MAX_BYTES": "1" * 4400}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
    ({"SERVICE_HISTORY_MAX_BYTES": "64TB"}, "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES"),
])
def test_bad_environment_values_fail_naming_the_key(environ: dict[str, str], toml_key: str,
                                                    env_key: str) -> None:
    fails_naming(environ, toml_key, env_key)


def test_bad_toml_values_fail_naming_the_key_and_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 5\n")
    fails_naming({}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL", path, path=path)


@pytest.mark.parametrize(("text", "key"), [
    ("[server]\nbase_path = 5\n", "server.base_path"),
    ("[server]\nbase_path = [\"/a\"]\n", "server.base_path"),
    ("[server]\noperations_level = true\n", "server.operations_level"),
    ("[server]\nself_metrics = 1.5\n", "server.self_metrics"),
    ("[docker]\napi_version = 1.41\n", "docker.api_version"),
    ("[server.listen_addr]\nport = 1\n", "server.listen_addr"),
    ("[server.sse]\nbatch_interval = nan\n", "server.sse.batch_interval"),
    ("[server.sse]\nbatch_interval = inf\n", "server.sse.batch_interval"),
])
def test_toml_values_of_the_wrong_type_fail_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    fails_naming({}, key, path=write(tmp_path, text))


# --------------------------------------------------------------------------- base_path
@pytest.mark.parametrize(("text", "normalised"), [("", ""), ("/", ""), (" / ", ""), ("shoal", "/shoal"),
                                                  ("/shoal/", "/shoal"), ("/ops/shoal", "/ops/shoal"),
                                                  (" /a-b_c.d~e/ ", "/a-b_c.d~e"), ("/v1.2", "/v1.2")])
def test_base_paths_are_normalised(text: str, normalised: str) -> None:
    assert load_settings({"SERVICE_BASE_PATH": text}).base_path == normalised


@pytest.mark.parametrize("text", ["/a//b", "//", "/x//", "//x", "/x?y=1", "/x?", "/x#frag", "#", "/a b", "/a\tb",
                                  "/.", "/..", "/a/../b", "./a", "/a/./b", "/a%20b", "/café", "/a\\b"])
def test_bad_base_paths_fail_naming_the_key(text: str) -> None:
    fails_naming({"SERVICE_BASE_PATH": text}, "server.base_path", "SERVICE_BASE_PATH")


# --------------------------------------------------------------------------- prometheus.url
@pytest.mark.parametrize(("text", "url"), [("http://prom:9090", "http://prom:9090"),
                                           ("https://prom.example/prefix/", "https://prom.example/prefix"),
                                           ("http://[::1]:9090", "http://[::1]:9090"), ("", None), ("  ", None)])
def test_prometheus_urls_are_accepted(text: str, url: str | None) -> None:
    assert load_settings({"SERVICE_PROMETHEUS_URL": text}).prometheus_url == url


@pytest.mark.parametrize("text", ["prom:9090", "ftp://prom", "http://", "http:///x", "http://prom:9090/?q=1",
                                  "http://prom/#x", "http://prom:99999", "http://prom:port", "http://pr om",
                                  "http://prom/a b", "http://[::1"])
def test_bad_prometheus_urls_fail_naming_the_key(text: str) -> None:
    fails_naming({"SERVICE_PROMETHEUS_URL": text}, "prometheus.url", "SERVICE_PROMETHEUS_URL")


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize(("text", "seconds"), [("100ms", 0.1), ("1h30m", 5400.0), ("2s", 2.0), ("1.5", 1.5),
                                               ("500us", 0.0005), ("2µs", 2e-6), ("2μs", 2e-6), ("3ns", 3e-9),
                                               ("1m0.5s", 60.5), (" 3s ", 3.0), (".5s", 0.5), ("1.5h", 5400.0),
                                               ("5", 5.0), (".25", 0.25), ("-2m", -120.0), ("+1s", 1.0)])
def test_durations_are_go_style_or_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "1x", "1h 30m", "ms", "1s2", "nan", "inf", "-inf", "1e3", ".", "s",
                                  "--1s", "1" + "0" * 400, "1" + "0" * 400 + "h"])
def test_malformed_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


# --------------------------------------------------------------------------- the configuration file
def test_an_unreadable_or_malformed_file_fails_naming_the_file(tmp_path: Path) -> None:
    broken = write(tmp_path, "[server\noperations_level = ")
    with pytest.raises(ConfigError, match=r"shoal\.toml"):
        load_settings({}, broken)
    with pytest.raises(ConfigError, match=r"missing\.toml.*--config"):
        load_settings({}, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match=r"missing\.toml.*SERVICE_CONFIG"):
        load_settings({"SERVICE_CONFIG": str(tmp_path / "missing.toml")})
    with pytest.raises(ConfigError, match=str(tmp_path)):
        load_settings({}, str(tmp_path))  # a directory


def test_a_file_that_is_not_utf8_fails_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[server]\nbase_path = "/caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.toml.*UTF-8"):
        load_settings({}, str(path))


def test_the_first_existing_searched_file_is_used(tmp_path: Path) -> None:
    second, third = tmp_path / "second.toml", tmp_path / "third.toml"
    second.write_text("[server]\noperations_level = 2\n")
    third.write_text("[server]\noperations_level = 3\n")
    settings = load_settings({}, search_paths=[tmp_path / "absent.toml", second, third])
    assert settings.operations_level == 2
    assert settings.report.config_file == str(second)


def test_searched_files_are_optional(tmp_path: Path) -> None:
    settings = load_settings({}, search_paths=[tmp_path / "absent.toml"])
    assert settings == Settings() and settings.report.config_file is None


def test_a_named_file_skips_the_search(tmp_path: Path) -> None:
    searched = tmp_path / "searched.toml"
    searched.write_text("[server]\noperations_level = 3\n")
    named = write(tmp_path, "[server]\noperations_level = 2\n")
    assert load_settings({}, named, search_paths=[searched]).operations_level == 2


def test_the_default_search_list_follows_the_reference() -> None:
    paths = default_search_paths  # imported before the autouse fixture replaced the module attribute
    assert paths({"HOME": "/home/ops"}) == (Path("shoal.toml"), Path("/home/ops/.config/shoal/shoal.toml"),
                                            Path("/home/ops/.shoal.toml"), Path("/etc/shoal/shoal.toml"))
    assert paths({"HOME": "/home/ops", "XDG_CONFIG_HOME": "/cfg"})[1] == Path("/cfg/shoal/shoal.toml")
    assert paths({"HOME": "/home/ops", "XDG_CONFIG_HOME": "rel"})[1] == Path("/home/ops/.config/shoal/shoal.toml")
    assert paths({}) == (Path("shoal.toml"), Path("/etc/shoal/shoal.toml"))


def test_load_settings_searches_the_default_list_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real default_search_paths, with a fake home and working directory
    (tmp_path / ".shoal.toml").write_text("[server]\noperations_level = 0\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert settings.operations_level == 0
    assert settings.report.config_file == str(tmp_path / ".shoal.toml")


# --------------------------------------------------------------------------- the state store (storage.*)
def test_the_state_store_defaults_to_a_data_directory_and_can_be_turned_off(tmp_path: Path) -> None:
    settings = load_settings({})
    assert (settings.data_dir, settings.storage_snapshot, settings.persistence) == ("./data", True, True)
    assert load_settings({"SERVICE_DATA_DIR": ":memory:"}).persistence is False
    assert load_settings({"SERVICE_SNAPSHOT": "false"}).persistence is False
    path = write(tmp_path, '[storage]\ndata_dir = "/var/lib/shoal"\nsnapshot = false\n')
    from_file = load_settings({}, path)
    assert (from_file.data_dir, from_file.storage_snapshot) == ("/var/lib/shoal", False)
    assert from_file.report.not_implemented == ()


@pytest.mark.parametrize(("environ", "key"), [({"SERVICE_DATA_DIR": " "}, "storage.data_dir"),
                                              ({"SERVICE_SNAPSHOT": "maybe"}, "storage.snapshot")])
def test_bad_state_store_values_fail_naming_the_key(environ: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_settings(environ)


# --------------------------------------------------------------------------- unknown and pending keys
def test_unknown_keys_are_reported_not_fatal(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nlisten_adr = \":1\"\n[mystery]\nx = 1\n")
    settings = load_settings({"SERVICE_LISTEN_ADR": ":1", "SERVICE_CONFIG_FILE": "x", "OTHER": "1"}, path)
    assert settings.report.unknown == ("mystery.x", "server.listen_adr", "SERVICE_CONFIG_FILE", "SERVICE_LISTEN_ADR")
    assert settings.report.not_implemented == ()


def test_known_keys_and_file_variants_are_not_reported(tmp_path: Path) -> None:
    (tmp_path / "level").write_text("1")
    path = write(tmp_path, "[server]\noperations_level = 1\n[server.sse]\nbatch_interval = \"1s\"\n")
    environ = {"SERVICE_CONFIG": path, "SERVICE_LOG_LEVEL": "info",
               "SERVICE_OPERATIONS_LEVEL_FILE": str(tmp_path / "level")}
    report = load_settings(environ).report
    assert (report.unknown, report.not_implemented) == ((), ())


def test_keys_of_the_reference_not_built_yet_are_reported_as_not_implemented(tmp_path: Path) -> None:
    path = write(tmp_path, """
[server]
pprof = true
[auth.tailscale]
mode = "local"
[acl]
labels = true
[sizing.thresholds]
at_limit = 0.9
""")
    environ = {name: "x" for name in (
        "SERVICE_PPROF", "SERVICE_AUTH_TAILSCALE_AUTHKEY", "SERVICE_ACL_LABELS",
        "SERVICE_SIZING_LOOKBACK", "SERVICE_PPROF_FILE")}
    report = load_settings(environ, path).report
    assert report.unknown == ()
    assert set(report.not_implemented) == set(environ) | {
        "server.pprof", "auth.tailscale.mode", "acl.labels", "sizing.thresholds.at_limit"}


def test_auth_keys_are_read_and_checked_per_mode(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    settings = load_settings({
        "SERVICE_AUTH_MODE": "headers", "SERVICE_AUTH_HEADERS_SUBJECT": "X-Forwarded-User",
        "SERVICE_AUTH_HEADERS_GROUPS": "X-Forwarded-Groups", "SERVICE_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8",
        "SERVICE_AUTH_HEADERS_TRUSTED_PROXIES": "::1", "SERVICE_AUTH_HEADERS_SECRET_HEADER": "X-Proxy-Secret",
        "SERVICE_AUTH_HEADERS_SECRET_VALUE_FILE": str(secret)})
    assert settings.auth_mode == "headers" and settings.headers_subject == "X-Forwarded-User"
    assert settings.trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8", "::1/128")
    assert settings.headers_secret_value == "s3cr3t" and "s3cr3t" not in repr(settings)
    with pytest.raises(config.ConfigError, match=r"auth\.headers\.subject"):
        load_settings({"SERVICE_AUTH_MODE": "headers", "SERVICE_TRUSTED_PROXIES": "127.0.0.1"})
    with pytest.raises(config.ConfigError, match="trusted_proxies"):
        load_settings({"SERVICE_AUTH_MODE": "headers", "SERVICE_AUTH_HEADERS_SUBJECT": "X-User"})
    with pytest.raises(config.ConfigError, match="client_secret"):
        load_settings({"SERVICE_AUTH_MODE": "oidc", "SERVICE_AUTH_OIDC_ISSUER": "https://id.example",
                       "SERVICE_AUTH_OIDC_CLIENT_ID": "shoal",
                       "SERVICE_AUTH_OIDC_REDIRECT_URL": "https://shoal.example/auth/callback"})
    with pytest.raises(config.ConfigError, match="https unless"):
        load_settings({"SERVICE_AUTH_MODE": "oidc", "SERVICE_AUTH_OIDC_ISSUER": "https://id.example",
                       "SERVICE_AUTH_OIDC_CLIENT_ID": "shoal", "SERVICE_AUTH_OIDC_CLIENT_SECRET": "x",
                       "SERVICE_AUTH_OIDC_REDIRECT_URL": "http://shoal.example/auth/callback"})
    with pytest.raises(config.ConfigError, match=r"tls\.cert"):
        load_settings({"SERVICE_AUTH_MODE": "cert", "SERVICE_AUTH_CERT_CA": str(secret)})


def test_a_bad_secret_is_never_echoed(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("zz-not-hex-topsecret")
    with pytest.raises(config.ConfigError) as raised:
        load_settings({"SERVICE_AUTH_OIDC_SESSION_KEY_FILE": str(key)})
    assert "topsecret" not in str(raised.value) and "auth.oidc.session_key" in str(raised.value)


def test_the_report_is_logged_as_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "[mystery]\nx = 1\n")
    settings = load_settings({"SERVICE_PPROF": "1"}, path)
    with caplog.at_level(logging.INFO, logger="app.config"):
        log_report(settings)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "app.config"]
    assert (logging.INFO, f"configuration file {Path(path).absolute()}") in records
    assert (logging.WARNING, "unknown configuration keys ignored: mystery.x") in records
    assert any(level == logging.WARNING and "not implemented in this version" in message
               and "SERVICE_PPROF" in message for level, message in records)


def test_a_clean_start_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="app.config"):
        log_report(load_settings({}))
    assert [r.levelno for r in caplog.records if r.name == "app.config"] == [logging.INFO]


def test_every_key_is_described_with_both_spellings() -> None:
    described = describe_keys()
    assert ("server.operations_level", "SERVICE_OPERATIONS_LEVEL", "1") in described
    assert ("server.listen_addr", "SERVICE_LISTEN_ADDR", "0.0.0.0:9000") in described
    assert all(env.startswith("SERVICE_") for _, env, _ in described)


# --------------------------------------------------------------------------- history byte bound
@pytest.mark.parametrize(("text", "expected"), [
    ("67108864", 64 * 1024**2), ("64MiB", 64 * 1024**2), ("64mib", 64 * 1024**2), ("1536KB", 1_536_000),
    ("2048 KiB", 2 * 1024**2), ("1.5GB", 1_500_000_000), ("1GiB", 1024**3), ("2000000b", 2_000_000),
])
def test_history_max_bytes_accepts_bytes_and_sizes(text: str, expected: int) -> None:
    assert load_settings({"SERVICE_HISTORY_MAX_BYTES": text}).history_max_bytes == expected


def test_history_max_bytes_from_toml_as_integer_or_size(tmp_path: Path) -> None:
    as_int = write(tmp_path, "[server]\nhistory_max_bytes = 10485760\n")
    assert load_settings({}, as_int).history_max_bytes == 10 * 1024**2
    as_text = write(tmp_path, "[server]\nhistory_max_bytes = \"16MiB\"\n", "sized.toml")
    assert load_settings({}, as_text).history_max_bytes == 16 * 1024**2


def test_the_runtime_bounds_the_history_with_the_configured_bytes() -> None:
    from app.runtime import Runtime

    runtime = Runtime(Settings(history_size=100, history_max_bytes=1024**2))
    for index in range(2000):  # a few KB each: the byte bound is reached before the record bound
        runtime.cache.upsert(ResourceKind.CONFIG, {"ID": "c", "Version": {"Index": index},
                                                   "Spec": {"Name": "c", "Data": "x" * 2000}})
    assert runtime.cache.history.bytes <= 1024**2
    assert len(runtime.cache.history) < 100


def test_agent_keys_are_read_with_their_defaults_and_checked(tmp_path: Path) -> None:
    settings = load_settings({"SERVICE_MCP": "true", "SERVICE_MCP_ISSUER": "https://shoal.example/",
                              "SERVICE_MCP_SIGNING_KEY": "k" * 40, "SERVICE_MCP_AUTH_BYPASS": "cert"})
    assert settings.mcp_enabled and settings.mcp_issuer == "https://shoal.example"
    assert settings.mcp_signing_key == b"k" * 40 and settings.mcp_auth_bypass == ("cert",)
    assert settings.mcp_level == settings.operations_level
    assert load_settings({"SERVICE_MCP_OPERATIONS_LEVEL": "3"}).mcp_level == 3
    for name, value in (("SERVICE_MCP_SIGNING_KEY", "short"), ("SERVICE_MCP_ISSUER", "https://h/?q=1"),
                        ("SERVICE_MCP_AUTH_BYPASS", "oidc"), ("SERVICE_MCP_DCR_RATE_LIMIT", "0")):
        with pytest.raises(ConfigError) as caught:
            load_settings({name: value})
        assert name in str(caught.value)
        assert value not in str(caught.value) or name != "SERVICE_MCP_SIGNING_KEY"
