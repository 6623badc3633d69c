"""gunicorn settings: one gevent worker (the cache lives in the process), Runtime started in the worker.

No ``preload_app``: the Docker client and greenlets must be created after gevent has patched the worker.
"""

from __future__ import annotations

import os
from typing import Any

from app.config import load_settings
from app.logconfig import dict_config

_settings = load_settings()


def _bind(listen_addr: str) -> str:
    host, _, port = listen_addr.rpartition(":")
    return f"{host or '0.0.0.0'}:{port or '9000'}"


bind = os.environ.get("GUNICORN_BIND", _bind(_settings.listen_addr))
worker_class = "gevent"
workers = 1
worker_connections = 2000          # well above the 256 + 128 + 64 stream caps plus ordinary requests
timeout = 30
graceful_timeout = 10
keepalive = 5
preload_app = False
logconfig_dict = dict_config(_settings.log_level, _settings.log_format)
if _settings.tls_enabled:
    certfile, keyfile = _settings.tls_cert, _settings.tls_key


def post_worker_init(worker: Any) -> None:
    from app.runtime import runtime_of

    runtime_of(worker.wsgi).start()


def worker_exit(server: Any, worker: Any) -> None:
    from app.runtime import runtime_of

    app = getattr(worker, "wsgi", None)
    if app is not None:
        runtime_of(app).stop()
