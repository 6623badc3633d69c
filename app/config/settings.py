"""The settings types: what the rest of the service reads (``Settings``) and the error that names a
bad key. Loading lives in ``app.config.loading``, the key table and value parsers in ``app.config.keys``."""

from __future__ import annotations

from dataclasses import dataclass, field

PRODUCT = "shoal"
MIN_API_VERSION = (1, 41)  # Docker Engine 20.10: the watcher relies on its events and filters


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range; the message names the key."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """``server.listen_addr`` parsed once: a TCP host and port, or a unix socket path."""

    host: str = "0.0.0.0"
    port: int = 9000
    unix_path: str | None = None

    @property
    def is_unix(self) -> bool:
        return self.unix_path is not None

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    def __str__(self) -> str:
        """The gunicorn ``bind`` spelling: ``unix:/path``, ``host:port`` or ``[v6]:port``."""
        if self.unix_path is not None:
            return f"unix:{self.unix_path}"
        return f"[{self.host}]:{self.port}" if self.is_ipv6 else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What ``load_settings`` read and ignored, for one log entry at start."""

    config_file: str | None = None
    unknown: tuple[str, ...] = ()
    not_implemented: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Settings:
    listen_addr: ListenAddress = ListenAddress()
    base_path: str = ""
    operations_level: int = 1
    self_metrics: bool = True
    recommendations: bool = True              # the recommendation engine and /recommendations
    recommendations_debounce: float = 0.5     # seconds from a change to the re-evaluation of the checks
    sse_batch_interval: float = 0.1
    sse_keepalive: float = 15.0          # idle seconds before a ":keepalive" comment (docs/streams.md)
    docker_host: str = "unix:///var/run/docker.sock"
    docker_api_version: str = "1.41"
    prometheus_url: str | None = None
    log_level: str = "info"
    log_format: str = "json"
    tls_cert: str | None = None
    tls_key: str | None = None
    auth_mode: str = "none"             # none, headers, oidc, cert (app.auth)
    trusted_proxies: tuple[str, ...] = ()   # CIDRs whose X-Forwarded-For is trusted; required for headers
    external_url: str | None = None         # root URL as clients see it: absolute links (JSON Feed); None: request's
    cors_origins: tuple[str, ...] = ()      # origins whose pages may call the API (app.http.cors); ("*",): any
    cors_credentials: bool = False          # Access-Control-Allow-Credentials (cookies) for those origins
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = field(default=None, repr=False)
    oidc_redirect_url: str | None = None
    oidc_scopes: tuple[str, ...] = ("openid", "profile", "email")
    oidc_session_key: bytes | None = field(default=None, repr=False)   # None: random per start
    cert_ca: str | None = None
    headers_subject: str | None = None
    headers_name: str | None = None
    headers_email: str | None = None
    headers_groups: str | None = None
    headers_secret_header: str | None = None
    headers_secret_value: str | None = field(default=None, repr=False)
    headers_trusted_proxies: tuple[str, ...] = ()   # deprecated alias of trusted_proxies
    acl_policy: str | None = None       # inline policy text (JSON, YAML or TOML); wins over the file
    acl_policy_file: str | None = None  # hot-reloaded
    acl_oidc_claim: str | None = None   # OIDC claim holding per-user grants (JSON array)
    acl_headers_acl: str | None = None  # proxy header holding per-user grants (JSON array)
    task_poll_interval: float = 1.0
    resync_interval: float = 300.0
    history_size: int = 10_000
    history_max_bytes: int = 64 * 1024 * 1024
    data_dir: str = "./data"           # the state store's directory (app.store); ":memory:" keeps no state
    storage_snapshot: bool = True      # persist history, sequence and snapshot; load them at start
    history_retention: float = 30 * 86400.0            # the store keeps records this long (seconds) …
    history_archive_max_bytes: int = 1024 ** 3         # … and within this many estimated bytes
    writes_max_replicas: int = 1000         # a write may not ask more replicas (or job concurrency) than this
    writes_max_labels: int = 256            # labels per object (service, container, node, config, secret...)
    writes_max_env: int = 1000              # environment entries per service
    writes_max_patch_operations: int = 1000   # operations in one JSON Patch / members of one merge patch
    writes_max_string_length: int = 65536   # characters of any one string a write adds to a spec
    writes_timeout: float = 10.0            # seconds an engine write call may take before its outcome is unknown
    writes_pending_audit: float = 600.0     # seconds a write of unknown outcome waits for its change to be seen
    writes_idempotency_ttl: float = 86400.0   # seconds an Idempotency-Key and its stored answer are kept
    writes_idempotency_max_keys: int = 10_000   # keys kept at most (oldest dropped first)
    mcp_enabled: bool = False               # serve {base_path}/mcp (docs/agents.md)
    mcp_operations_level: int | None = None   # tool ceiling 0-3; None: server.operations_level
    mcp_issuer: str | None = None           # external base URL of the OAuth server; None: derived
    mcp_signing_key: bytes | None = field(default=None, repr=False)   # None: generated, kept in the store
    mcp_access_token_ttl: float = 3600.0
    mcp_refresh_token_ttl: float = 720 * 3600.0
    mcp_require_resource_indicator: bool = True
    mcp_dcr_enabled: bool = True
    mcp_dcr_rate_limit: int = 10            # registrations per hour per client IP
    mcp_dcr_max_clients: int = 1000         # registered clients kept (least recently used evicted)
    mcp_cimd_enabled: bool = True           # https client_ids: client-metadata documents
    mcp_auth_bypass: tuple[str, ...] = ()   # modes accepted at /mcp without a token (cert)
    mcp_session_idle_ttl: float = 1800.0    # an MCP session unused this long ends
    mcp_max_sessions: int = 256             # open MCP sessions at most (over it: JSON-RPC error, retry hint)
    mcp_max_body_bytes: int = 1024 * 1024   # a POST /mcp body at most
    report: LoadReport = field(default=LoadReport(), compare=False, repr=False)

    @property
    def persistence(self) -> bool:
        """State survives restarts (``storage.snapshot`` on and ``storage.data_dir`` not ``:memory:``)."""
        return self.storage_snapshot and self.data_dir != ":memory:"

    @property
    def mcp_level(self) -> int:
        """The agent tools' ceiling: ``mcp.operations_level``, else ``server.operations_level``."""
        return self.operations_level if self.mcp_operations_level is None else self.mcp_operations_level

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None
