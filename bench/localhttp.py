"""What the benchmarks need of plain HTTP on 127.0.0.1: a free port for a server, and one request on a fresh
connection read to EOF (a new connection is what a health probe or a stalled accept loop shows)."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return int(probe_socket.getsockname()[1])


def fresh_get(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """One JSON request on a new connection (Connection: close), read to EOF; status 0 when the answer is
    not HTTP."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
                     "Connection: close\r\n\r\n".encode())
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data.partition(b"\r\n\r\n")[2]
