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

from app.acl.source import check_policy
from app.config import ConfigError, load_settings, log_report
from app.logconfig import dict_config

try:
    _settings = load_settings()
    check_policy(_settings)
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
        import gevent
        from gunicorn.workers import ggevent

        ggevent.StreamServer = _TLSStreamServer   # the class GeventWorker.run builds its servers from
        gevent.spawn(self._head_waits().run_reaper, lambda: self.alive)
        super().run()

    def _head_waits(self) -> Any:
        """The connections waiting for a request head (``app.http.connections``), made on first use."""
        waits = getattr(self, "_waits", None)
        if waits is None:
            from app.http.connections import HeadWaits

            waits = self._waits = HeadWaits(self.worker_connections)
        return waits

    def timeout_ctx(self) -> Any:
        """gunicorn's read timeout of a request head (``keepalive``), registered so that a crowded worker
        can end the oldest idle ones early and a stopping one all of them (app.http.connections)."""
        return self._head_waits().wait(self.cfg.keepalive)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        """A request answered while the worker stops closes its connection (gunicorn decides keep-alive
        before the request runs: a write answered at SIGTERM would otherwise hold the stop 5 s more)."""
        super().handle_request(listener_name, req, sock, addr)
        if not self.alive:
            raise StopIteration()

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: stop as gunicorn does, and (out of the signal handler) answer the writes waiting for a
        rollout with the state so far and end the streams with a final frame: both would otherwise hold the
        graceful stop for its whole timeout and get the worker killed before the store closes."""
        super().handle_exit(sig, frame)
        import gevent

        gevent.spawn(_drain, self.wsgi, self.cfg.graceful_timeout)
        gevent.spawn(self._head_waits().cut_all)   # idle keep-alive and half-open connections close now


def _drain(app: Any, graceful: float) -> None:
    """Answer the waiting writes and end the streams at once; then, should requests still run when only
    :data:`STOP_BUDGET` of ``graceful_timeout`` is left, stop the runtime (watcher, then store) anyway, so the
    master's SIGKILL at the timeout never finds the store open. ``worker_exit`` stops it otherwise (no-op
    when done here)."""
    import gevent

    from app.runtime import runtime_of
    from app.streams.response import shutdown_streams

    runtime = runtime_of(app)
    runtime.drain()
    shutdown_streams(app)
    gevent.sleep(max(0.0, graceful - STOP_BUDGET))
    if runtime.running:
        logging.getLogger("shoal.server").warning(
            "requests still running near the graceful timeout; stopping the runtime now",
            extra={"graceful_timeout_s": graceful})
        runtime.stop()


bind = str(_settings.listen_addr)       # gunicorn's own -b/--bind and GUNICORN_CMD_ARGS win
worker_class = ProblemGeventWorker
# Request limits (the same under ``shoal``: app.http.server_errors): request line 8190 bytes (414 over it),
# 100 header fields and 8190 bytes per field (431 over them).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
workers = 1
# gunicorn believes X-Forwarded-Proto (wsgi.url_scheme) only from server.trusted_proxies, as the app does
# (app.http.links): its default trusts any local peer.
forwarded_allow_ips = ",".join(_settings.trusted_proxies)
# gunicorn >= 25.1 opens a control socket at one per-user path ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl)
# for every instance: a second service on the same host took the first one's socket, and `gunicornc` could
# add workers, which would split the cache. Off (remove this line to use gunicornc, with --control-socket PATH).
control_socket_disable = True
worker_connections = 2000          # well above the 256 + 128 + 64 stream caps plus ordinary requests
timeout = 30
# SIGTERM → the master SIGKILLs a worker still running after graceful_timeout. Waiting writes are answered
# and streams ended at once (ProblemGeventWorker.handle_exit); the runtime (watcher, then the store) is
# stopped at the latest STOP_BUDGET seconds before the timeout (it takes ~0.1 s, at most ~3.5 s with a hung
# engine: app.runtime.WATCHER_STOP_TIMEOUT + kills + the store's last flush).
graceful_timeout = 10
STOP_BUDGET = 4.0
keepalive = 5
preload_app = False
logconfig_dict = dict_config(_settings.log_level, _settings.log_format)
logger_class = "app.logconfig.AccessLogger"   # the access line in gunicorn's format, made without the atoms dict
certfile = _settings.tls_cert      # None unless both tls.cert and tls.key are set (checked by load_settings)
keyfile = _settings.tls_key
if _settings.auth_mode == "cert":   # mTLS (app.auth.cert): a presented client certificate must chain to
    cert_reqs = ssl.CERT_OPTIONAL   # auth.cert.ca or the handshake fails; without one the app answers 401
    ca_certs = _settings.cert_ca    # (CERT_REQUIRED would give no HTTP answer at all, not even /-/health)


def on_starting(server: Any) -> None:
    """In the master, once, after gunicorn has applied ``logconfig_dict``."""
    log_report(_settings)
    from app.config.exposure import warn_exposure

    warn_exposure(_settings, server.cfg.bind)   # the addresses really bound (-b wins over listen_addr)


def post_worker_init(worker: Any) -> None:
    from app.runtime import runtime_of

    runtime = runtime_of(worker.wsgi)
    runtime.binds = tuple(worker.cfg.bind)      # /-/ready's unauthenticatedWrites (app.config.exposure)
    runtime.start()


def worker_exit(server: Any, worker: Any) -> None:
    from app.runtime import runtime_of

    app = getattr(worker, "wsgi", None)
    if app is not None:
        runtime_of(app).stop()
