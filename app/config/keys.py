"""Every configuration key as one row (field, TOML key, environment variable, parser, accepted TOML
types), and the parsers that turn text into typed values; a parser raises ``ValueError`` with the reason
and the loader adds the key's names."""


from __future__ import annotations

import importlib.util
import ipaddress
import math
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from app.config.settings import MIN_API_VERSION, ListenAddress

# --------------------------------------------------------------------------- value parsers
# Go accepts both the micro sign (U+00B5) and the Greek mu (U+03BC) for microseconds.
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_SECONDS = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go durations (``100ms``, ``1h30m``, ``.5s``, ``-2m``) or plain seconds (``1.5``); returns seconds.

    :raises ValueError: malformed, or not finite (``nan``, ``inf``, absurdly long digit strings).
    """
    value = text.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        sign = -1.0 if value.startswith("-") else 1.0
        body = value[1:] if value[:1] in ("+", "-") else value
        parts = _DURATION_PART.findall(body)
        if not parts or "".join(number + unit for number, unit in parts) != body:
            raise ValueError(f"not a duration: {text!r} (use e.g. 100ms, 1.5s, 1h30m or plain seconds)")
        seconds = sign * sum(float(number) * _UNITS[unit] for number, unit in parts)
    if not math.isfinite(seconds):
        raise ValueError(f"not a finite duration: {text!r}")
    return seconds


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"must be a positive duration, not {text.strip()!r}")
    return value


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r} (use true or false)")


def _ranged_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, not {value}")
        return value
    return parse


_BYTE_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?", re.IGNORECASE)
_BYTE_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _byte_size(low: int, high: int) -> Callable[[str], int]:
    """Plain bytes (``67108864``) or a size with a unit: ``512KB``, ``64MiB``, ``1.5GB`` (KB/MB/GB powers of
    1000, KiB/MiB/GiB powers of 1024, case-insensitive)."""
    def parse(text: str) -> int:
        match = _BYTE_SIZE.fullmatch(text.strip())
        if match is None or len(match[1]) > 30:
            raise ValueError(f"not a size in bytes: {text!r} (use e.g. 67108864, 512KB or 64MiB)")
        value = int(float(match[1]) * _BYTE_UNITS[(match[2] or "b").lower()])
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high} bytes, not {value}")
        return value
    return parse


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, not {text!r}")
        return value
    return parse


def _log_level(text: str) -> str:
    return _choice("debug", "info", "warn", "warning", "error")(text).replace("warning", "warn")


def _auth_mode(text: str) -> str:
    if text.strip().lower() == "tailscale":
        raise ValueError("'tailscale' is not implemented in this version (no tailscaled to test against); "
                         "use none, headers, oidc or cert")
    return _choice("none", "headers", "oidc", "cert")(text.strip().lower())


def _networks(text: str) -> tuple[str, ...]:
    """Comma list of IP addresses or CIDRs (``10.0.0.0/8, 127.0.0.1, ::1``), normalised. Strict: a CIDR with
    host bits set (``192.168.1.10/1``) is refused, never widened to its network (``128.0.0.0/1``)."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            found.append(str(ipaddress.ip_network(part, strict=True)))
        except ValueError as exc:
            reason = "host bits set (write the network address)" if "host bits set" in str(exc) \
                else "not an IP address or CIDR"
            raise ValueError(f"{reason}: {part!r}") from None
    return tuple(found)


def _text(text: str) -> str | None:
    value = text.strip()
    return value or None


def _header_name(text: str) -> str | None:
    value = text.strip()
    if not value:
        return None
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", value):
        raise ValueError(f"not an HTTP header name: {value!r}")
    return value


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _http_url(text: str) -> str | None:
    value = text.strip()
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {value!r}")
    return value


def _hex_key(text: str) -> bytes | None:
    value = text.strip()
    if not value:
        return None
    try:
        key = bytes.fromhex(value)
    except ValueError:
        raise ValueError("not hexadecimal (value not shown: it is a secret)") from None
    if len(key) != 32:
        raise ValueError(f"must be 32 bytes (64 hex digits), not {len(key)} (value not shown: it is a secret)")
    return key


def _signing_key(text: str) -> bytes | None:
    """``mcp.signing_key``: the HMAC key of access tokens and consent CSRF tokens, at least 32 bytes of text
    (64 hex digits are taken as 32 bytes)."""
    value = text.strip()
    if not value:
        return None
    if re.fullmatch(r"[0-9a-fA-F]{64,}", value) and len(value) % 2 == 0:
        return bytes.fromhex(value)
    key = value.encode("utf-8")
    if len(key) < 32:
        raise ValueError(f"must be at least 32 bytes, not {len(key)} (value not shown: it is a secret)")
    return key


def _issuer(text: str) -> str | None:
    """``mcp.issuer``: http(s), a host, maybe a path; no query, fragment or credentials; trailing ``/`` off."""
    value = _http_url(text)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{value!r}: no query, fragment, user or password allowed")
    return value.rstrip("/")


def _bypass_modes(text: str) -> tuple[str, ...]:
    modes = tuple(part.lower() for part in _comma_list(text) if part.lower() != "none")
    for mode in modes:
        if mode not in ("cert", "headers"):
            raise ValueError(f"{mode!r}: only cert and headers can be accepted without a token "
                             "(oidc redirects a browser: unsafe)")
    return modes


_LISTEN = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*):(?P<port>[^:]*)")
_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"{_HOST_LABEL}(\.{_HOST_LABEL})*\.?")


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"the port must be 1-65535, not {text!r}")
    return int(text)


def _listen_host(host: str) -> str:
    if not host:
        return "0.0.0.0"  # ":9000" means every IPv4 interface
    try:
        if host.startswith("["):
            return str(ipaddress.IPv6Address(host[1:-1]))
        if re.fullmatch(r"[\d.]+", host):
            return str(ipaddress.IPv4Address(host))
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address") from None
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(f"{host!r} is not an IPv4 address, [IPv6] address or host name")
    return host


def _unix_path(text: str) -> str:
    path = text.removeprefix("unix:")
    path = path[2:] if path.startswith("//") else path  # unix:///run/x.sock is unix:/run/x.sock
    if not path.startswith("/") or path.endswith("/"):
        raise ValueError(f"{text!r}: a unix socket needs an absolute file path, e.g. unix:/run/shoal.sock")
    if len(os.fsencode(path)) > 107:
        raise ValueError(f"{text!r}: a unix socket path is limited to 107 bytes")
    return path


def _listen_addr(text: str) -> ListenAddress:
    value = text.strip()
    if value.startswith("unix:"):
        return ListenAddress(unix_path=_unix_path(value))
    match = _LISTEN.fullmatch(value)
    if match is None:
        raise ValueError(f"{text!r} is not host:port, [IPv6]:port or unix:/path (e.g. :9000, 127.0.0.1:9000)")
    return ListenAddress(host=_listen_host(match["host"]), port=_port(match["port"]))


_PATH_SEGMENT = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]+")  # RFC 3986 pchar without %: PATH_INFO is decoded


def _base_path(text: str) -> str:
    """``shoal/`` → ``/shoal``; ``""`` and ``/`` → no prefix."""
    value = text.strip()
    if value in ("", "/"):
        return ""
    if any(bad in value for bad in ("?", "#", "//")):
        raise ValueError(f"must not contain ?, # or //: {text!r}")
    if any(char.isspace() for char in value):
        raise ValueError(f"must not contain whitespace: {text!r}")
    segments = value.strip("/").split("/")
    if any(segment in (".", "..") for segment in segments):
        raise ValueError(f"must not contain . or .. segments: {text!r}")
    if not all(_PATH_SEGMENT.fullmatch(segment) for segment in segments):
        raise ValueError(f"must contain only URL path characters (no %-escapes): {text!r}")
    return "/" + "/".join(segments)


def _has_paramiko() -> bool:
    return importlib.util.find_spec("paramiko") is not None


def docker_host_uri(text: str) -> str:
    """A URI the docker SDK can use: ``unix:///path``, ``tcp://host:port`` or ``ssh://[user@]host``."""
    value = text.strip()
    scheme, separator, rest = value.partition("://")
    if not separator:
        raise ValueError(f"{text!r} is not a URI; use unix:///var/run/docker.sock, tcp://host:2375 or ssh://host")
    if scheme == "unix":
        if not rest.startswith("/") or rest == "/":
            raise ValueError(f"{text!r}: unix:// needs an absolute socket path, e.g. unix:///var/run/docker.sock")
        return value
    if scheme not in ("tcp", "ssh"):
        raise ValueError(f"{text!r}: the scheme must be unix, tcp or ssh")
    parts = urlsplit(value)
    if not parts.hostname or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"{text!r}: {scheme}:// needs a host and nothing after it but a port")
    if scheme == "tcp" and not parts.port:  # .port raises ValueError itself above 65535
        raise ValueError(f"{text!r}: tcp:// needs a port, e.g. tcp://{parts.hostname}:2375")
    if scheme == "ssh" and not _has_paramiko():
        raise ValueError(f"{text!r}: ssh:// needs the paramiko package, which is not installed; "
                         "use unix:// or tcp:// (e.g. through an SSH tunnel)")
    return value


def _api_version(text: str) -> str:
    value = text.strip()
    match = re.fullmatch(r"(\d+)\.(\d+)", value)
    if match is None:
        raise ValueError(f"{text!r} is not an API version like 1.41")
    if (int(match[1]), int(match[2])) < MIN_API_VERSION:
        raise ValueError(f"{value} is too old; 1.41 (Docker Engine 20.10) or newer is needed")
    return value


def _prometheus_url(text: str) -> str | None:
    value = text.strip()
    if not value:
        return None
    if any(char.isspace() for char in value):
        raise ValueError(f"must not contain whitespace: {text!r}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http:// or https:// URL with a host")
    if "?" in value or "#" in value:
        raise ValueError(f"{text!r}: no query or fragment allowed")
    _ = parts.port  # raises ValueError for a malformed or out-of-range port
    return value.rstrip("/")


def _origins(text: str) -> tuple[str, ...]:
    """``*`` alone, or a comma list of serialized origins (``https://ui.example``, ``http://127.0.0.1:8080``),
    normalised as browsers send them: scheme and host lower-case, no default port, no path."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if parts == ["*"]:
        return ("*",)
    found: list[str] = []
    for part in parts:
        if part == "*":
            raise ValueError("* must stand alone (it allows every origin)")
        split = urlsplit(part)
        if split.scheme.lower() not in ("http", "https") or not split.hostname or split.username is not None \
                or split.path not in ("", "/") or split.query or split.fragment:
            raise ValueError(f"{part!r} is not an origin (scheme://host[:port], no path)")
        try:
            port = split.port
        except ValueError:
            raise ValueError(f"{part!r}: malformed port") from None
        scheme, host = split.scheme.lower(), split.hostname.lower()
        host = f"[{host}]" if ":" in host else host
        default = {"http": 80, "https": 443}[scheme]
        found.append(f"{scheme}://{host}" + (f":{port}" if port not in (None, default) else ""))
    return tuple(dict.fromkeys(found))


def _readable_file(text: str) -> str | None:
    value = text.strip()
    if not value:
        return None  # SERVICE_TLS_CERT="" means unset
    try:
        with open(value, "rb"):
            pass
    except OSError as exc:
        raise ValueError(f"cannot read {value}: {exc.strerror}") from None
    return value


def _data_dir(text: str) -> str:
    """The state directory (created at start if missing), or ``:memory:`` for no persistence."""
    value = text.strip()
    if not value:
        raise ValueError("must be a directory path, or :memory: to keep no state across restarts")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


def _external_url(text: str) -> str | None:
    """``server.external_url``: the service's root URL as clients reach it (http(s), a host, maybe a path
    prefix a proxy adds; no query, fragment or credentials); the trailing ``/`` is stripped."""
    value = _prometheus_url(text)
    if value is not None and "@" in urlsplit(value).netloc:
        raise ValueError(f"{text!r}: no user or password allowed")
    return value


# --------------------------------------------------------------------------- the key table
class Key(NamedTuple):
    field: str
    toml: str
    env: str
    parse: Callable[[str], Any]
    toml_types: tuple[type, ...]


_STR, _INT, _BOOL, _DURATION = (str,), (int, str), (bool, str), (str, int, float)
KEYS: tuple[Key, ...] = (
    Key("listen_addr", "server.listen_addr", "SERVICE_LISTEN_ADDR", _listen_addr, _STR),
    Key("base_path", "server.base_path", "SERVICE_BASE_PATH", _base_path, _STR),
    Key("operations_level", "server.operations_level", "SERVICE_OPERATIONS_LEVEL", _ranged_int(0, 3), _INT),
    Key("self_metrics", "server.self_metrics", "SERVICE_SELF_METRICS", _bool, _BOOL),
    Key("recommendations", "server.recommendations", "SERVICE_RECOMMENDATIONS", _bool, _BOOL),
    Key("recommendations_debounce", "server.recommendations_debounce", "SERVICE_RECOMMENDATIONS_DEBOUNCE",
        _positive_duration, _DURATION),
    Key("sse_batch_interval", "server.sse.batch_interval", "SERVICE_SSE_BATCH_INTERVAL", _positive_duration,
        _DURATION),
    Key("sse_keepalive", "server.sse.keepalive", "SERVICE_SSE_KEEPALIVE", _positive_duration, _DURATION),
    Key("docker_host", "docker.host", "SERVICE_DOCKER_HOST", docker_host_uri, _STR),
    Key("docker_api_version", "docker.api_version", "SERVICE_DOCKER_API_VERSION", _api_version, _STR),
    Key("prometheus_url", "prometheus.url", "SERVICE_PROMETHEUS_URL", _prometheus_url, _STR),
    Key("log_level", "logging.level", "SERVICE_LOG_LEVEL", _log_level, _STR),
    Key("log_format", "logging.format", "SERVICE_LOG_FORMAT", _choice("json", "text"), _STR),
    Key("tls_cert", "tls.cert", "SERVICE_TLS_CERT", _readable_file, _STR),
    Key("tls_key", "tls.key", "SERVICE_TLS_KEY", _readable_file, _STR),
    Key("auth_mode", "auth.mode", "SERVICE_AUTH_MODE", _auth_mode, _STR),
    Key("trusted_proxies", "server.trusted_proxies", "SERVICE_TRUSTED_PROXIES", _networks, _STR),
    Key("external_url", "server.external_url", "SERVICE_EXTERNAL_URL", _external_url, _STR),
    Key("cors_origins", "server.cors.origins", "SERVICE_CORS_ORIGINS", _origins, _STR),
    Key("cors_credentials", "server.cors.credentials", "SERVICE_CORS_CREDENTIALS", _bool, _BOOL),
    Key("oidc_issuer", "auth.oidc.issuer", "SERVICE_AUTH_OIDC_ISSUER", _http_url, _STR),
    Key("oidc_client_id", "auth.oidc.client_id", "SERVICE_AUTH_OIDC_CLIENT_ID", _text, _STR),
    Key("oidc_client_secret", "auth.oidc.client_secret", "SERVICE_AUTH_OIDC_CLIENT_SECRET", _text, _STR),
    Key("oidc_redirect_url", "auth.oidc.redirect_url", "SERVICE_AUTH_OIDC_REDIRECT_URL", _http_url, _STR),
    Key("oidc_scopes", "auth.oidc.scopes", "SERVICE_AUTH_OIDC_SCOPES", _comma_list, _STR),
    Key("oidc_session_key", "auth.oidc.session_key", "SERVICE_AUTH_OIDC_SESSION_KEY", _hex_key, _STR),
    Key("cert_ca", "auth.cert.ca", "SERVICE_AUTH_CERT_CA", _readable_file, _STR),
    Key("headers_subject", "auth.headers.subject", "SERVICE_AUTH_HEADERS_SUBJECT", _header_name, _STR),
    Key("headers_name", "auth.headers.name", "SERVICE_AUTH_HEADERS_NAME", _header_name, _STR),
    Key("headers_email", "auth.headers.email", "SERVICE_AUTH_HEADERS_EMAIL", _header_name, _STR),
    Key("headers_groups", "auth.headers.groups", "SERVICE_AUTH_HEADERS_GROUPS", _header_name, _STR),
    Key("headers_secret_header", "auth.headers.secret_header", "SERVICE_AUTH_HEADERS_SECRET_HEADER", _header_name,
        _STR),
    Key("headers_secret_value", "auth.headers.secret_value", "SERVICE_AUTH_HEADERS_SECRET_VALUE", _text, _STR),
    Key("headers_trusted_proxies", "auth.headers.trusted_proxies", "SERVICE_AUTH_HEADERS_TRUSTED_PROXIES",
        _networks, _STR),
    Key("acl_policy", "acl.policy", "SERVICE_ACL_POLICY", _text, _STR),
    Key("acl_policy_file", "acl.policy_file", "SERVICE_ACL_POLICY_FILE", _text, _STR),
    Key("acl_oidc_claim", "acl.oidc_claim", "SERVICE_AUTH_OIDC_ACL_CLAIM", _text, _STR),
    Key("acl_headers_acl", "acl.headers_acl", "SERVICE_AUTH_HEADERS_ACL", _header_name, _STR),
    Key("task_poll_interval", "watcher.task_poll_interval", "SERVICE_WATCHER_TASK_POLL_INTERVAL",
        _positive_duration, _DURATION),
    Key("resync_interval", "watcher.resync_interval", "SERVICE_WATCHER_RESYNC_INTERVAL", _positive_duration,
        _DURATION),
    Key("history_size", "server.history_size", "SERVICE_HISTORY_SIZE", _ranged_int(100, 1_000_000), _INT),
    Key("history_max_bytes", "server.history_max_bytes", "SERVICE_HISTORY_MAX_BYTES",
        _byte_size(1024**2, 64 * 1024**3), _INT),
    Key("data_dir", "storage.data_dir", "SERVICE_DATA_DIR", _data_dir, _STR),
    Key("storage_snapshot", "storage.snapshot", "SERVICE_SNAPSHOT", _bool, _BOOL),
    # the audit trail in the store (docs/state-store.md): kept by age and bytes, beyond the in-memory ring
    Key("history_retention", "storage.history_retention", "SERVICE_HISTORY_RETENTION", _positive_duration,
        _DURATION),
    Key("history_archive_max_bytes", "storage.history_max_bytes", "SERVICE_HISTORY_ARCHIVE_MAX_BYTES",
        _byte_size(1024**2, 1024**4), _INT),
    # write safety (docs/writes.md): bounds on what a write may ask, engine-call timeout, Idempotency-Key store
    Key("writes_max_replicas", "writes.max_replicas", "SERVICE_WRITES_MAX_REPLICAS", _ranged_int(0, 1_000_000),
        _INT),
    Key("writes_max_labels", "writes.max_labels", "SERVICE_WRITES_MAX_LABELS", _ranged_int(1, 100_000), _INT),
    Key("writes_max_env", "writes.max_env", "SERVICE_WRITES_MAX_ENV", _ranged_int(1, 100_000), _INT),
    Key("writes_max_patch_operations", "writes.max_patch_operations", "SERVICE_WRITES_MAX_PATCH_OPERATIONS",
        _ranged_int(1, 100_000), _INT),
    Key("writes_max_string_length", "writes.max_string_length", "SERVICE_WRITES_MAX_STRING_LENGTH",
        _ranged_int(64, 1024 * 1024), _INT),
    Key("writes_timeout", "writes.timeout", "SERVICE_WRITES_TIMEOUT", _positive_duration, _DURATION),
    Key("writes_pending_audit", "writes.pending_audit", "SERVICE_WRITES_PENDING_AUDIT", _positive_duration,
        _DURATION),
    Key("writes_idempotency_ttl", "writes.idempotency_ttl", "SERVICE_WRITES_IDEMPOTENCY_TTL", _positive_duration,
        _DURATION),
    Key("writes_idempotency_max_keys", "writes.idempotency_max_keys", "SERVICE_WRITES_IDEMPOTENCY_MAX_KEYS",
        _ranged_int(10, 10_000_000), _INT),
    # the agent-tool (MCP) endpoint and its OAuth 2.1 authorization server (docs/agents.md)
    Key("mcp_enabled", "mcp.enabled", "SERVICE_MCP", _bool, _BOOL),
    Key("mcp_operations_level", "mcp.operations_level", "SERVICE_MCP_OPERATIONS_LEVEL", _ranged_int(0, 3), _INT),
    Key("mcp_issuer", "mcp.issuer", "SERVICE_MCP_ISSUER", _issuer, _STR),
    Key("mcp_signing_key", "mcp.signing_key", "SERVICE_MCP_SIGNING_KEY", _signing_key, _STR),
    Key("mcp_access_token_ttl", "mcp.access_token_ttl", "SERVICE_MCP_ACCESS_TOKEN_TTL", _positive_duration,
        _DURATION),
    Key("mcp_refresh_token_ttl", "mcp.refresh_token_ttl", "SERVICE_MCP_REFRESH_TOKEN_TTL", _positive_duration,
        _DURATION),
    Key("mcp_require_resource_indicator", "mcp.oauth.require_resource_indicator",
        "SERVICE_MCP_REQUIRE_RESOURCE_INDICATOR", _bool, _BOOL),
    Key("mcp_dcr_enabled", "mcp.oauth.dcr_enabled", "SERVICE_MCP_DCR_ENABLED", _bool, _BOOL),
    Key("mcp_dcr_rate_limit", "mcp.oauth.dcr_rate_limit", "SERVICE_MCP_DCR_RATE_LIMIT", _ranged_int(1, 1_048_576),
        _INT),
    Key("mcp_dcr_max_clients", "mcp.oauth.dcr_max_clients", "SERVICE_MCP_DCR_MAX_CLIENTS",
        _ranged_int(1, 1_048_576), _INT),
    Key("mcp_cimd_enabled", "mcp.oauth.cimd_enabled", "SERVICE_MCP_CIMD_ENABLED", _bool, _BOOL),
    Key("mcp_auth_bypass", "mcp.oauth.auth_bypass", "SERVICE_MCP_AUTH_BYPASS", _bypass_modes, _STR),
    Key("mcp_session_idle_ttl", "mcp.session_idle_ttl", "SERVICE_MCP_SESSION_IDLE_TTL", _positive_duration,
        _DURATION),
    Key("mcp_max_sessions", "mcp.max_sessions", "SERVICE_MCP_MAX_SESSIONS", _ranged_int(1, 100_000), _INT),
    Key("mcp_max_body_bytes", "mcp.max_body_bytes", "SERVICE_MCP_MAX_BODY_BYTES", _ranged_int(1024, 64 * 1024**2),
        _INT),
)

# Documented keys that this version recognises but does not implement (fnmatch patterns).
PENDING_TOML = ("server.pprof", "auth.tailscale.*", "acl.labels", "acl.tailscale_capability",
                 "sizing.*")
PENDING_ENV = ("SERVICE_PPROF", "SERVICE_AUTH_TAILSCALE_*", "SERVICE_ACL_LABELS",
                "SERVICE_SIZING_*")
# Keys whose values are secrets: a bad value is never echoed in an error or a log.
SECRET_FIELDS = frozenset({"oidc_client_secret", "oidc_session_key", "headers_secret_value", "mcp_signing_key"})
KNOWN_TOML = frozenset(key.toml for key in KEYS)
KNOWN_ENV = frozenset({"SERVICE_CONFIG"} | {key.env for key in KEYS} | {key.env + "_FILE" for key in KEYS})
