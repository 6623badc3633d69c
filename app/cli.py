"""``shoal``: run the service for development with gevent's WSGI server (production: gunicorn)."""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - gevent must patch before anything else imports sockets
import logging  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

from gevent.pywsgi import WSGIServer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shoal", description=__doc__)
    parser.add_argument("--config", help="TOML configuration file (else SERVICE_CONFIG)")
    args = parser.parse_args(argv)

    from app import create_app
    from app.config import ConfigError, load_settings
    from app.runtime import runtime_of

    try:
        settings = load_settings(config_path=args.config)
    except ConfigError as exc:
        print(f"shoal: configuration error: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings)
    runtime = runtime_of(app)
    host, _, port = settings.listen_addr.rpartition(":")
    server = WSGIServer((host or "0.0.0.0", int(port or 9000)), app, log=None,
                        error_log=logging.getLogger("shoal.server"))

    def shutdown(*_: object) -> None:
        server.stop(timeout=5)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    runtime.start()
    try:
        server.serve_forever()
    finally:
        runtime.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
