"""Settings: defaults < TOML file < ``<VAR>_FILE`` < environment ``SERVICE_*``.

This module is the only reader of the environment and of the configuration file. Every key is one row
of ``keys.KEYS`` (field, TOML key, environment variable, parser, accepted TOML types), so a bad value fails
at start with a ``ConfigError`` naming both spellings of the key. ``load_settings`` also records which
file it read and which keys it ignored (``Settings.report``); the caller logs that once, after logging
is configured (``log_report``).

The TOML file is ``--config`` / ``SERVICE_CONFIG`` when named (it must exist), else the first existing
file of ``default_search_paths``. ``DOCKER_HOST`` is the default of ``docker.host``, checked only when
neither ``docker.host`` nor ``SERVICE_DOCKER_HOST`` is set.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from app.config.keys import KEYS, KNOWN_ENV, KNOWN_TOML, PENDING_ENV, PENDING_TOML, SECRET_FIELDS, Key, docker_host_uri
from app.config.settings import PRODUCT, ConfigError, ListenAddress, LoadReport, Settings

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("app.config")  # one logger name for operators, whatever module logs
_KEY_ENVS = frozenset(key.env for key in KEYS)


# --------------------------------------------------------------------------- the configuration file
def default_search_paths(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """Where an unnamed configuration file may be: working dir, XDG config dir, home, ``/etc/shoal``."""
    name = f"{PRODUCT}.toml"
    home, xdg = environ.get("HOME", ""), environ.get("XDG_CONFIG_HOME", "")
    paths = [Path(name)]
    if os.path.isabs(xdg):  # the XDG spec ignores relative values
        paths.append(Path(xdg, PRODUCT, name))
    elif home:
        paths.append(Path(home, ".config", PRODUCT, name))
    if home:
        paths.append(Path(home, f".{name}"))
    return (*paths, Path("/etc", PRODUCT, name))


def _config_file(environ: Mapping[str, str], config_path: str | None,
                 search_paths: Sequence[Path] | None) -> Path | None:
    """The named file (which must exist), else the first existing file of the search list, else None."""
    named, origin = (config_path, "--config") if config_path else (environ.get("SERVICE_CONFIG"), "SERVICE_CONFIG")
    if named:
        if not Path(named).exists():
            raise ConfigError(f"configuration file {named} (from {origin}) does not exist")
        return Path(named)
    candidates = default_search_paths(environ) if search_paths is None else search_paths
    return next((path for path in candidates if path.exists()), None)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"configuration file {path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file {path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration file {path}: {exc}") from None


def _toml_value(document: Mapping[str, Any], dotted: str) -> Any:
    value: Any = document
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _toml_leaves(document: Mapping[str, Any], prefix: str = "") -> list[str]:
    leaves: list[str] = []
    for name, value in document.items():
        if isinstance(value, Mapping):
            leaves.extend(_toml_leaves(value, f"{prefix}{name}."))
        else:
            leaves.append(f"{prefix}{name}")
    return leaves


# --------------------------------------------------------------------------- resolving one key
def _toml_text(key: Key, value: Any) -> str:
    if type(value) not in key.toml_types:  # type(), not isinstance: a TOML bool is no integer here
        wanted = " or ".join({str: "a string", int: "an integer", bool: "a boolean", float: "a number"}[t]
                             for t in key.toml_types)
        raise ValueError(f"must be {wanted} in TOML, not {type(value).__name__}")
    return str(value).lower() if isinstance(value, bool) else str(value)


def _file_variable(name: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _raw_value(key: Key, document: Mapping[str, Any], environ: Mapping[str, str],
               where: str) -> tuple[str, str] | None:
    """(text, origin) from the environment, its ``_FILE`` variant or the TOML file ``where``; None when unset."""
    if key.env in environ:
        return environ[key.env], key.env
    file_variable = key.env + "_FILE"
    if environ.get(file_variable) and file_variable not in _KEY_ENVS:   # SERVICE_ACL_POLICY_FILE is a key
        return _file_variable(file_variable, environ[file_variable]), file_variable
    value = _toml_value(document, key.toml)
    if value is None:
        return None
    try:
        return _toml_text(key, value), f"{key.toml} in {where}"
    except ValueError as exc:
        raise ConfigError(f"{key.toml} in {where} ({key.toml} / {key.env}): {exc}") from None


def _resolve(key: Key, document: Mapping[str, Any], environ: Mapping[str, str], where: str) -> tuple[bool, Any]:
    """(is_set, parsed value); a parse failure becomes a ConfigError naming the key and where it was set."""
    raw = _raw_value(key, document, environ, where)
    if raw is None:
        return False, None
    text, origin = raw
    try:
        return True, key.parse(text)
    except ValueError as exc:
        reason = "invalid value (not shown: it is a secret)" if key.field in SECRET_FIELDS else str(exc)
        raise ConfigError(f"{origin} ({key.toml} / {key.env}): {reason}") from None


def _default_docker_host(environ: Mapping[str, str]) -> str | None:
    if "DOCKER_HOST" not in environ:
        return None
    try:
        return docker_host_uri(environ["DOCKER_HOST"])
    except ValueError as exc:
        raise ConfigError(f"DOCKER_HOST (the default for docker.host / SERVICE_DOCKER_HOST): {exc}") from None


# --------------------------------------------------------------------------- TLS
def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server-side TLS context for the PEM pair; also proves at start that the pair loads."""
    import ssl  # late: the ``shoal`` command monkey-patches ssl before it gets here

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def _check_tls(cert: str | None, key: str | None) -> None:
    names = "tls.cert / SERVICE_TLS_CERT and tls.key / SERVICE_TLS_KEY"
    if (cert is None) != (key is None):
        raise ConfigError(f"{names}: set both or neither")
    if cert is None or key is None:
        return
    try:
        tls_context(cert, key)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigError(f"{names}: not a matching PEM certificate and private key ({exc})") from None


# --------------------------------------------------------------------------- auth
def _require(values: Mapping[str, Any], mode: str, *fields_: str) -> None:
    from app.config.keys import KEYS as keys
    names = {key.field: f"{key.toml} / {key.env}" for key in keys}
    missing = [names[f] for f in fields_ if values.get(f) in (None, "", ())]
    if missing:
        raise ConfigError(f"auth.mode = {mode} needs {', '.join(missing)}")


def _check_auth(values: dict[str, Any]) -> None:
    """What each mode needs; ``auth.headers.trusted_proxies`` (deprecated) adds to ``server.trusted_proxies``."""
    alias = values.pop("headers_trusted_proxies", ())
    if alias:
        values["trusted_proxies"] = tuple(dict.fromkeys((*values.get("trusted_proxies", ()), *alias)))
    mode = values.get("auth_mode", "none")
    if (values.get("headers_secret_header") is None) != (values.get("headers_secret_value") is None):
        raise ConfigError("auth.headers.secret_header / SERVICE_AUTH_HEADERS_SECRET_HEADER and "
                          "auth.headers.secret_value / SERVICE_AUTH_HEADERS_SECRET_VALUE: set both or neither")
    if values.get("acl_policy") and values.get("acl_policy_file"):
        log.warning("acl.policy and acl.policy_file are both set: the inline policy wins (the file is ignored)")
    if mode == "headers":
        _require(values, mode, "headers_subject")
        if not values.get("trusted_proxies") and not values.get("headers_secret_header"):
            raise ConfigError("auth.mode = headers needs server.trusted_proxies / SERVICE_TRUSTED_PROXIES (the "
                              "proxy's addresses), or a shared secret (auth.headers.secret_header and "
                              "secret_value), or both: otherwise anyone could send the identity headers")
    elif mode == "oidc":
        _require(values, mode, "oidc_issuer", "oidc_client_id", "oidc_client_secret", "oidc_redirect_url")
        redirect = urlsplit(values["oidc_redirect_url"])
        if redirect.scheme != "https" and redirect.hostname not in ("localhost", "127.0.0.1", "::1"):
            raise ConfigError("auth.oidc.redirect_url / SERVICE_AUTH_OIDC_REDIRECT_URL: must be https unless the "
                              "host is loopback")
    elif mode == "cert":
        _require(values, mode, "cert_ca", "tls_cert", "tls_key")


def _check_cors(values: Mapping[str, Any]) -> None:
    """Credentials go only to listed origins: with ``*`` any page could act with the browser's session."""
    if values.get("cors_credentials") and values.get("cors_origins", ()) == ("*",):
        raise ConfigError("server.cors.credentials / SERVICE_CORS_CREDENTIALS needs server.cors.origins / "
                          "SERVICE_CORS_ORIGINS to list the origins, not *")


# --------------------------------------------------------------------------- loading
def _ignored(names: Iterable[str], known: frozenset[str], pending: Sequence[str],
             strip: str = "") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(unknown, recognised but not implemented) among ``names``, sorted; ``strip`` is the ``_FILE`` suffix."""
    unknown: list[str] = []
    not_implemented: list[str] = []
    for name in sorted(set(names) - known):
        is_pending = any(fnmatchcase(name.removesuffix(strip), pattern) for pattern in pending)
        (not_implemented if is_pending else unknown).append(name)
    return tuple(unknown), tuple(not_implemented)


def _report(path: Path | None, document: Mapping[str, Any], environ: Mapping[str, str]) -> LoadReport:
    toml_unknown, toml_pending = _ignored(_toml_leaves(document), KNOWN_TOML, PENDING_TOML)
    env_names = (name for name in environ if name.startswith("SERVICE_"))
    env_unknown, env_pending = _ignored(env_names, KNOWN_ENV, PENDING_ENV, strip="_FILE")
    return LoadReport(None if path is None else str(path.absolute()), toml_unknown + env_unknown,
                      toml_pending + env_pending)


def load_settings(environ: Mapping[str, str] | None = None, config_path: str | None = None,
                  search_paths: Sequence[Path] | None = None) -> Settings:
    """Build Settings from defaults, a TOML file and the environment.

    :param config_path: the ``--config`` flag; wins over ``SERVICE_CONFIG``.
    :param search_paths: where to look for an unnamed file (default ``default_search_paths``).
    :raises ConfigError: a bad value, a missing named file, an unreadable or malformed file.
    """
    environ = os.environ if environ is None else environ
    path = _config_file(environ, config_path, search_paths)
    document = _read_toml(path) if path is not None else {}
    values: dict[str, Any] = {}
    for key in KEYS:
        is_set, value = _resolve(key, document, environ, str(path))
        if is_set:
            values[key.field] = value
    if "docker_host" not in values and (default_host := _default_docker_host(environ)) is not None:
        values["docker_host"] = default_host
    _check_tls(values.get("tls_cert"), values.get("tls_key"))
    _check_auth(values)
    _check_cors(values)
    return Settings(**values, report=_report(path, document, environ))


def log_report(settings: Settings) -> None:
    """Log the file read and the keys ignored; call once per start, after logging is configured."""
    report = settings.report
    if report.config_file:
        log.info("configuration file %s", report.config_file, extra={"config_file": report.config_file})
    else:
        log.info("no configuration file; defaults and environment only")
    if report.unknown:
        log.warning("unknown configuration keys ignored: %s", ", ".join(report.unknown),
                    extra={"keys": list(report.unknown)})
    if report.not_implemented:
        log.warning("configuration keys recognised but not implemented in this version, ignored: %s",
                    ", ".join(report.not_implemented), extra={"keys": list(report.not_implemented)})


def describe_keys() -> list[tuple[str, str, str]]:
    """(TOML key, environment variable, default) for the documentation."""
    defaults = {f.name: f.default for f in fields(Settings)}
    shown = {name: str(value) if isinstance(value, ListenAddress) else repr(value) for name, value in defaults.items()}
    return [(key.toml, key.env, shown[key.field]) for key in KEYS]
