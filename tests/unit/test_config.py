"""Settings: defaults < TOML < environment; DOCKER_HOST as a default; bad values fail naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigError, Settings, describe_keys, load_settings, parse_duration


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "shoal.toml"
    path.write_text(text)
    return str(path)


def test_defaults_without_file_or_environment() -> None:
    settings = load_settings({})
    assert settings == Settings()
    assert settings.listen_addr == ":9000"
    assert settings.base_path == ""
    assert settings.operations_level == 1
    assert settings.self_metrics is True
    assert settings.sse_batch_interval == pytest.approx(0.1)
    assert settings.docker_host == "unix:///var/run/docker.sock"
    assert (settings.log_level, settings.log_format) == ("info", "json")
    assert (settings.tls_cert, settings.tls_key, settings.tls_enabled) == (None, None, False)
    assert settings.auth_mode == "none"
    assert settings.history_size == 10_000


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
[logging]
level = "WARNING"
format = "text"
""")
    settings = load_settings({}, path)
    assert settings.listen_addr == "127.0.0.1:8080"
    assert settings.base_path == "/shoal"
    assert settings.operations_level == 2
    assert settings.self_metrics is False
    assert settings.sse_batch_interval == pytest.approx(0.25)
    assert settings.docker_host == "tcp://10.0.0.1:2376"
    assert (settings.log_level, settings.log_format) == ("warn", "text")


def test_the_config_path_can_come_from_service_config(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 3\n")
    assert load_settings({"SERVICE_CONFIG": path}).operations_level == 3


def test_environment_wins_over_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 2\nlisten_addr = \":1\"\n")
    settings = load_settings({"SERVICE_OPERATIONS_LEVEL": "0"}, path)
    assert settings.operations_level == 0
    assert settings.listen_addr == ":1"  # not overridden: the TOML value stays


def test_environment_values_are_parsed() -> None:
    settings = load_settings({"SERVICE_SELF_METRICS": "0", "SERVICE_SSE_BATCH_INTERVAL": "1s",
                              "SERVICE_BASE_PATH": "/ops/shoal/", "SERVICE_PROMETHEUS_URL": "http://prom:9090/",
                              "SERVICE_LOG_LEVEL": "debug", "SERVICE_HISTORY_SIZE": "500"})
    assert settings.self_metrics is False
    assert settings.sse_batch_interval == 1.0
    assert settings.base_path == "/ops/shoal"
    assert settings.prometheus_url == "http://prom:9090"
    assert settings.log_level == "debug"
    assert settings.history_size == 500


def test_docker_host_is_the_default_engine_address() -> None:
    assert load_settings({"DOCKER_HOST": "tcp://engine:2375"}).docker_host == "tcp://engine:2375"


def test_service_docker_host_wins_over_docker_host() -> None:
    settings = load_settings({"DOCKER_HOST": "tcp://engine:2375", "SERVICE_DOCKER_HOST": "ssh://ops@manager"})
    assert settings.docker_host == "ssh://ops@manager"


def test_tls_needs_both_cert_and_key() -> None:
    settings = load_settings({"SERVICE_TLS_CERT": "/c.pem", "SERVICE_TLS_KEY": "/k.pem"})
    assert settings.tls_enabled
    for environ in ({"SERVICE_TLS_CERT": "/c.pem"}, {"SERVICE_TLS_KEY": "/k.pem"}):
        with pytest.raises(ConfigError, match=r"tls\.cert.*tls\.key"):
            load_settings(environ)


@pytest.mark.parametrize(("environ", "toml_key", "env_key"), [
    ({"SERVICE_OPERATIONS_LEVEL": "5"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_OPERATIONS_LEVEL": "-1"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_OPERATIONS_LEVEL": "two"}, "server.operations_level", "SERVICE_OPERATIONS_LEVEL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "fast"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "0s"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_SSE_BATCH_INTERVAL": "-5"}, "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL"),
    ({"SERVICE_BASE_PATH": "/a//b"}, "server.base_path", "SERVICE_BASE_PATH"),
    ({"SERVICE_BASE_PATH": "/x?y=1"}, "server.base_path", "SERVICE_BASE_PATH"),
    ({"SERVICE_BASE_PATH": "/x#frag"}, "server.base_path", "SERVICE_BASE_PATH"),
    ({"SERVICE_SELF_METRICS": "maybe"}, "server.self_metrics", "SERVICE_SELF_METRICS"),
    ({"SERVICE_DOCKER_HOST": "/var/run/docker.sock"}, "docker.host", "SERVICE_DOCKER_HOST"),
    ({"SERVICE_LOG_FORMAT": "xml"}, "logging.format", "SERVICE_LOG_FORMAT"),
    ({"SERVICE_LOG_LEVEL": "loud"}, "logging.level", "SERVICE_LOG_LEVEL"),
    ({"SERVICE_PROMETHEUS_URL": "prom:9090"}, "prometheus.url", "SERVICE_PROMETHEUS_URL"),
    ({"SERVICE_AUTH_MODE": "magic"}, "auth.mode", "SERVICE_AUTH_MODE"),
])
def test_bad_environment_values_fail_naming_the_key(environ: dict[str, str], toml_key: str,
                                                    env_key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(environ)
    message = str(raised.value)
    assert toml_key in message and env_key in message


def test_bad_toml_values_fail_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\noperations_level = 5\n")
    with pytest.raises(ConfigError, match=r"server\.operations_level"):
        load_settings({}, path)


def test_an_unreadable_or_malformed_file_fails_naming_the_file(tmp_path: Path) -> None:
    broken = write(tmp_path, "[server\noperations_level = ")
    with pytest.raises(ConfigError, match=r"shoal\.toml"):
        load_settings({}, broken)
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        load_settings({}, str(tmp_path / "missing.toml"))


def test_empty_base_path_means_no_prefix() -> None:
    assert load_settings({"SERVICE_BASE_PATH": "/"}).base_path == ""


@pytest.mark.parametrize(("text", "seconds"), [("100ms", 0.1), ("1h30m", 5400.0), ("2s", 2.0), ("1.5", 1.5),
                                               ("500us", 0.0005), ("1m0.5s", 60.5), (" 3s ", 3.0)])
def test_durations_are_go_style_or_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "1x", "1h 30m", "ms", "1s2"])
def test_malformed_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_every_key_is_described_with_both_spellings() -> None:
    described = describe_keys()
    assert ("server.operations_level", "SERVICE_OPERATIONS_LEVEL", "1") in described
    assert all(env.startswith("SERVICE_") for _, env, _ in described)
