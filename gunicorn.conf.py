"""gunicorn settings: one gevent worker (the cache lives in the process), Runtime started in the worker.

No ``preload_app``: the Docker client and greenlets must be created after gevent has patched the worker.
Request limits are explicit and the same as under ``shoal`` (``app.http.server_errors`` documents them):
the errors gunicorn writes itself (414, 431, 400 for a request that does not parse) are RFC 9457
problems with a Request-Id and the security headers, written by :class:`ProblemGeventWorker`.

A configuration error ends the master here with one line on stderr and status 2: gunicorn reports any
*Exception* from this file as "Failed to read config file" plus a traceback, but lets SystemExit through.
"""

from __future__ import annotations

import logging
import ssl
import sys
from typing import Any

from gevent.server import StreamServer
from gunicorn.workers.ggevent import GeventWorker

from app.config import ConfigError, load_settings, log_report
from app.logconfig import dict_config

try:
    _settings = load_settings()
except ConfigError as exc:
    print(f"shoal: configuration error: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None



class _TLSStreamServer(StreamServer):  # type: ignore[misc]  # gevent is untyped
    """A failed TLS handshake (a client certificate refused under ``auth.mode = cert``, plain HTTP on the
    HTTPS port) is one log line, as under ``shoal``, not a greenlet traceback per connection."""

    def wrap_socket_and_handle(self, client_socket: Any, address: Any) -> Any:
        try:
            return super().wrap_socket_and_handle(client_socket, address)
        except OSError as exc:  # ssl.SSLError, resets and timeouts during the handshake
            logging.getLogger("shoal.server").info("TLS connection failed",
                                                   extra={"peer": str(address), "error": str(exc)})
            return None


class ProblemGeventWorker(GeventWorker):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's gevent worker whose own error answers are problems (``app.http.server_errors``).

    gunicorn writes them through ``gunicorn.util.write_error``; the worker replaces that function in its
    own process only, once gevent has patched it and the app is loaded (the master never imports the app)."""

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from gunicorn import util

        from app.http.server_errors import gunicorn_error_writer

        util.write_error = gunicorn_error_writer(base_path=_settings.base_path, tls=_settings.tls_enabled)

    def run(self) -> None:
        from gunicorn.workers import ggevent

        ggevent.StreamServer = _TLSStreamServer   # the class GeventWorker.run builds its servers from
        super().run()

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: stop as gunicorn does, and end the event streams (out of the signal handler), which
        would otherwise hold the graceful stop for its whole timeout."""
        super().handle_exit(sig, frame)
        import gevent

        from app.streams.response import shutdown_streams

        gevent.spawn(shutdown_streams, self.wsgi)


bind = str(_settings.listen_addr)       # gunicorn's own -b/--bind and GUNICORN_CMD_ARGS win
worker_class = ProblemGeventWorker
# Request limits (the same under ``shoal``: app.http.server_errors): request line 8190 bytes (414 over it),
# 100 header fields and 8190 bytes per field (431 over them).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
workers = 1
worker_connections = 2000          # well above the 256 + 128 + 64 stream caps plus ordinary requests
timeout = 30
graceful_timeout = 10
keepalive = 5
preload_app = False
logconfig_dict = dict_config(_settings.log_level, _settings.log_format)
certfile = _settings.tls_cert      # None unless both tls.cert and tls.key are set (checked by load_settings)
keyfile = _settings.tls_key
if _settings.auth_mode == "cert":   # mTLS (app.auth.cert): a presented client certificate must chain to
    cert_reqs = ssl.CERT_OPTIONAL   # auth.cert.ca or the handshake fails; without one the app answers 401
    ca_certs = _settings.cert_ca    # (CERT_REQUIRED would give no HTTP answer at all, not even /-/health)


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
