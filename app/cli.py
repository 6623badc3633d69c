"""``shoal``: run the service for development with gevent's WSGI server (production: gunicorn).

It listens where ``server.listen_addr`` says (IPv4, ``[IPv6]`` or ``unix:/path``) and terminates TLS
itself when ``tls.cert`` / ``tls.key`` are set, as gunicorn does with the same settings.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - gevent must patch before anything else imports sockets
import contextlib  # noqa: E402
import errno  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
from http import client as http_client  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from gevent.pywsgi import WSGIHandler, WSGIServer  # noqa: E402

from app.http.server_errors import (  # noqa: E402
    HEADER_FIELD_SIZE_LIMIT,
    HEADER_FIELDS_LIMIT,
    REQUEST_LINE_LIMIT,
    problem_bytes,
)

if TYPE_CHECKING:
    from flask import Flask

    from app.config import ListenAddress, Settings

BACKLOG = 128
log = logging.getLogger(__name__)


class _TooLarge(ValueError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class ProblemHandler(WSGIHandler):  # type: ignore[misc]  # gevent is untyped
    """gevent's request handler with the same request limits as gunicorn (``app.http.server_errors``) and
    the same problem answers when a request is over them or does not parse (gevent's own are bare)."""

    def read_request(self, raw_requestline: str) -> Any:
        if len(raw_requestline.rstrip("\r\n")) > REQUEST_LINE_LIMIT:
            raise _TooLarge(414, f"The request line is longer than {REQUEST_LINE_LIMIT} bytes.")
        try:
            result = super().read_request(raw_requestline)
        except ValueError:
            if getattr(self.headers, "status", "") == "Line too long":
                raise _TooLarge(431, "A header field is too long.") from None
            raise
        if len(self.headers) > HEADER_FIELDS_LIMIT:
            raise _TooLarge(431, f"More than {HEADER_FIELDS_LIMIT} header fields.")
        if any(len(name) + 1 + len(value) > HEADER_FIELD_SIZE_LIMIT for name, value in self.headers.items()):
            raise _TooLarge(431, f"A header field is longer than {HEADER_FIELD_SIZE_LIMIT} bytes.")
        return result

    def _handle_client_error(self, ex: Exception) -> tuple[str, bytes]:
        if isinstance(ex, _TooLarge):
            self.log_error("Invalid request (from %s): %s", self.client_address, ex)
            return str(ex.status), str(ex).encode()
        if isinstance(ex, http_client.HTTPException):   # http.client's own header count limit
            self.log_error("Invalid request (from %s): %s", self.client_address, ex)
            return "431", f"More than {HEADER_FIELDS_LIMIT} header fields.".encode()
        status, _ = super()._handle_client_error(ex)
        return str(status), b"The request does not parse as HTTP/1.1."

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        environ["shoal.socket"] = self.socket   # the admission gate looks for a client gone while waiting
        return environ

    def handle_one_request(self) -> Any:
        result = super().handle_one_request()
        if isinstance(result, tuple):
            status, detail = result
            text = detail.decode("latin-1") if isinstance(detail, bytes) and not detail.startswith(b"HTTP/") else ""
            if not text:
                text = "The request line is too long." if str(status) == "414" else "The request is malformed."
            return status, problem_bytes(int(status), text, base_path=self.server.problem_base_path,
                                         tls=self.server.problem_tls)
        return result


class Server(WSGIServer):  # type: ignore[misc]  # gevent is untyped
    """gevent's WSGI server; a failed TLS handshake (say, plain HTTP on the HTTPS port) is one log line,
    not a greenlet traceback. Requests are read by :class:`ProblemHandler`."""

    handler_class = ProblemHandler
    problem_base_path = ""
    problem_tls = False

    def wrap_socket_and_handle(self, client_socket: socket.socket, address: Any) -> Any:
        try:
            return super().wrap_socket_and_handle(client_socket, address)
        except OSError as exc:  # ssl.SSLError, resets and timeouts during the handshake
            log.info("TLS connection failed", extra={"peer": str(address), "error": str(exc)})
            return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="shoal", description=__doc__)
    parser.add_argument("--config", "-config", metavar="FILE",
                        help="TOML configuration file (else SERVICE_CONFIG, else the searched locations)")
    return parser.parse_args(argv)


def _remove_stale_socket(path: str) -> None:
    """Remove a unix socket file nobody listens on any more; refuse a live socket or another file."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)
            return
    raise OSError(errno.EADDRINUSE, f"another process is listening on {path}")


def unix_listener(path: str) -> socket.socket:
    """A listening unix stream socket at ``path`` (a stale socket file there is replaced)."""
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def build_server(app: Flask, settings: Settings) -> Server:
    """gevent's WSGI server on the configured address, with TLS when a cert and key are configured.

    :raises OSError: the unix socket cannot be created (TCP addresses are bound by ``server.start()``).
    """
    from app.config import tls_context

    address = settings.listen_addr
    listener: Any = (unix_listener(address.unix_path) if address.unix_path is not None
                     else (address.host, address.port))  # gevent picks AF_INET6 for a host with ':'
    tls: dict[str, Any] = {}
    if settings.tls_cert is not None and settings.tls_key is not None:
        tls["ssl_context"] = tls_context(settings.tls_cert, settings.tls_key)
        if settings.auth_mode == "cert" and settings.cert_ca is not None:   # mTLS, as gunicorn.conf.py
            from app.auth.cert import verify_clients

            verify_clients(tls["ssl_context"], settings.cert_ca)
    server = Server(listener, app, log=None, error_log=logging.getLogger("shoal.server"), **tls)
    server.problem_base_path, server.problem_tls = settings.base_path, settings.tls_enabled
    return server


def _cleanup(address: ListenAddress) -> None:
    if address.unix_path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.unix_path)


def serve(app: Flask, settings: Settings) -> int:
    """Listen, start the Runtime, serve until SIGTERM/SIGINT; 1 when the address cannot be used."""
    from app.runtime import runtime_of

    try:
        server = build_server(app, settings)
        server.start()
    except OSError as exc:
        print(f"shoal: cannot listen on {settings.listen_addr}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    log.info("listening on %s", settings.listen_addr,
             extra={"listen_addr": str(settings.listen_addr), "tls": settings.tls_enabled})

    def shutdown(*_: object) -> None:
        server.stop(timeout=5)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    runtime = runtime_of(app)
    runtime.start()
    try:
        server.serve_forever()
    finally:
        runtime.stop()
        _cleanup(settings.listen_addr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    from app import create_app
    from app.acl.source import check_policy
    from app.config import ConfigError, load_settings, log_report

    try:
        settings = load_settings(config_path=args.config)
        check_policy(settings)
    except ConfigError as exc:
        print(f"shoal: configuration error: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings)  # configures logging
    log_report(settings)
    from app.config.exposure import warn_exposure

    warn_exposure(settings, (str(settings.listen_addr),))
    return serve(app, settings)


if __name__ == "__main__":
    raise SystemExit(main())
