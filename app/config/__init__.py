"""Settings: defaults < TOML file < ``<VAR>_FILE`` < environment ``SERVICE_*`` (``loading``), one row per
key (``keys``), typed values (``settings``)."""

from app.config.keys import parse_duration
from app.config.loading import default_search_paths, describe_keys, load_settings, log_report, tls_context
from app.config.settings import ConfigError, ListenAddress, LoadReport, Settings

__all__ = ["ConfigError", "ListenAddress", "LoadReport", "Settings", "default_search_paths", "describe_keys",
           "load_settings", "log_report", "parse_duration", "tls_context"]
