"""Client-side helpers for the listener tests: a throwaway TLS pair and HTTP over a unix socket."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
from pathlib import Path


def make_self_signed(directory: Path) -> tuple[str, str]:
    """A self-signed PEM certificate and key for 127.0.0.1/localhost (openssl), as (cert, key) paths."""
    assert shutil.which("openssl"), "the TLS tests need the openssl command"
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=20)
    return str(cert), str(key)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(self.path)


def get_over_unix(path: str, target: str) -> tuple[int, bytes]:
    """GET ``target`` from the server listening on the unix socket ``path``: (status, body)."""
    connection = UnixConnection(path)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()
