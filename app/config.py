"""Settings: defaults < TOML file (``--config`` / ``SERVICE_CONFIG``) < environment ``SERVICE_*``.

This module is the only reader of the environment. Every key is one row of ``_KEYS``: TOML path,
environment name, parser and default, so a bad value fails at start naming both spellings of the key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range; the message names the key."""


@dataclass(frozen=True, slots=True)
class Settings:
    listen_addr: str = ":9000"
    base_path: str = ""
    operations_level: int = 1
    self_metrics: bool = True
    sse_batch_interval: float = 0.1
    docker_host: str = "unix:///var/run/docker.sock"
    docker_api_version: str = "1.41"
    prometheus_url: str | None = None
    log_level: str = "info"
    log_format: str = "json"
    tls_cert: str | None = None
    tls_key: str | None = None
    auth_mode: str = "none"
    task_poll_interval: float = 1.0
    resync_interval: float = 300.0
    history_size: int = 10_000

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go-style durations (``100ms``, ``1h30m``) or plain seconds; returns seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError("must be positive")
    return value


def _ranged_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value
    return parse


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    return parse


def _base_path(text: str) -> str:
    value = text.strip().rstrip("/")
    if not value:
        return ""
    if any(bad in value for bad in ("?", "#", "//")):
        raise ValueError("must not contain ?, # or //")
    return value if value.startswith("/") else "/" + value


def _docker_host(text: str) -> str:
    if not re.match(r"^(unix|tcp|ssh|http|https|npipe)://", text):
        raise ValueError("must be a unix://, tcp:// or ssh:// URI")
    return text


def _url(text: str) -> str:
    if not re.match(r"^https?://[^/\s]+", text):
        raise ValueError("must be an http(s) URL")
    return text.rstrip("/")


def _text(text: str) -> str:
    return text


def _log_level(text: str) -> str:
    return _choice("debug", "info", "warn", "warning", "error")(text).replace("warning", "warn")


# field, TOML dotted key, environment variable, parser
_KEYS: tuple[tuple[str, str, str, Callable[[str], Any]], ...] = (
    ("listen_addr", "server.listen_addr", "SERVICE_LISTEN_ADDR", _text),
    ("base_path", "server.base_path", "SERVICE_BASE_PATH", _base_path),
    ("operations_level", "server.operations_level", "SERVICE_OPERATIONS_LEVEL", _ranged_int(0, 3)),
    ("self_metrics", "server.self_metrics", "SERVICE_SELF_METRICS", _bool),
    ("sse_batch_interval", "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL", _positive_duration),
    ("docker_host", "docker.host", "SERVICE_DOCKER_HOST", _docker_host),
    ("docker_api_version", "docker.api_version", "SERVICE_DOCKER_API_VERSION", _text),
    ("prometheus_url", "prometheus.url", "SERVICE_PROMETHEUS_URL", _url),
    ("log_level", "logging.level", "SERVICE_LOG_LEVEL", _log_level),
    ("log_format", "logging.format", "SERVICE_LOG_FORMAT", _choice("json", "text")),
    ("tls_cert", "tls.cert", "SERVICE_TLS_CERT", _text),
    ("tls_key", "tls.key", "SERVICE_TLS_KEY", _text),
    ("auth_mode", "auth.mode", "SERVICE_AUTH_MODE", _choice("none")),
    ("task_poll_interval", "watcher.task_poll_interval", "SERVICE_WATCHER_TASK_POLL_INTERVAL",
     _positive_duration),
    ("resync_interval", "watcher.resync_interval", "SERVICE_WATCHER_RESYNC_INTERVAL", _positive_duration),
    ("history_size", "server.history_size", "SERVICE_HISTORY_SIZE", _ranged_int(100, 1_000_000)),
)


def _toml_value(document: Mapping[str, Any], dotted: str) -> Any:
    value: Any = document
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def load_settings(environ: Mapping[str, str] | None = None, config_path: str | None = None) -> Settings:
    """Build Settings from defaults, an optional TOML file and the environment; raise ConfigError."""
    environ = os.environ if environ is None else environ
    path = config_path or environ.get("SERVICE_CONFIG")
    document: Mapping[str, Any] = {}
    if path:
        try:
            document = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"configuration file {path}: {exc}") from exc
    values: dict[str, Any] = {}
    if "DOCKER_HOST" in environ:  # the standard variable is the default; SERVICE_DOCKER_HOST wins
        values["docker_host"] = _docker_host(environ["DOCKER_HOST"])
    for name, toml_key, env_key, parse in _KEYS:
        raw = environ.get(env_key)
        origin = env_key
        if raw is None:
            toml_raw = _toml_value(document, toml_key)
            if toml_raw is None:
                continue
            raw, origin = (str(toml_raw).lower() if isinstance(toml_raw, bool) else str(toml_raw)), toml_key
        try:
            values[name] = parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{origin} ({toml_key} / {env_key}): {exc}") from exc
    settings = Settings(**values)
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ConfigError("tls.cert / SERVICE_TLS_CERT and tls.key / SERVICE_TLS_KEY: set both or neither")
    return settings


def describe_keys() -> list[tuple[str, str, str]]:
    """(TOML key, environment variable, default) for the documentation."""
    defaults = {f.name: f.default for f in fields(Settings)}
    return [(toml_key, env_key, repr(defaults[name])) for name, toml_key, env_key, _ in _KEYS]
