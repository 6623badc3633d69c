"""gunicorn settings: one gevent worker (the cache lives in the process), Runtime started in the worker.

No ``preload_app``: the Docker client and greenlets must be created after gevent has patched the worker.
A configuration error ends the master here with one line on stderr and status 2: gunicorn reports any
*Exception* from this file as "Failed to read config file" plus a traceback, but lets SystemExit through.
"""

from __future__ import annotations

import sys
from typing import Any

from app.config import ConfigError, load_settings, log_report
from app.logconfig import dict_config

try:
    _settings = load_settings()
except ConfigError as exc:
    print(f"shoal: configuration error: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None

bind = str(_settings.listen_addr)       # gunicorn's own -b/--bind and GUNICORN_CMD_ARGS win
worker_class = "gevent"
workers = 1
worker_connections = 2000          # well above the 256 + 128 + 64 stream caps plus ordinary requests
timeout = 30
graceful_timeout = 10
keepalive = 5
preload_app = False
logconfig_dict = dict_config(_settings.log_level, _settings.log_format)
certfile = _settings.tls_cert      # None unless both tls.cert and tls.key are set (checked by load_settings)
keyfile = _settings.tls_key


def on_starting(server: Any) -> None:
    """In the master, once, after gunicorn has applied ``logconfig_dict``."""
    log_report(_settings)


def post_worker_init(worker: Any) -> None:
    from app.runtime import runtime_of

    runtime_of(worker.wsgi).start()


def worker_exit(server: Any, worker: Any) -> None:
    from app.runtime import runtime_of

    app = getattr(worker, "wsgi", None)
    if app is not None:
        runtime_of(app).stop()
