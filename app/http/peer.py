"""Whether the client of a request is still there, asked without blocking, writing or yielding.

The admission gate skips a waiter whose client hung up, and an idle event stream releases its slot when its
client is gone (instead of at the next keepalive write); both ask the same question of the WSGI environ's
client socket, which gunicorn and ``shoal`` put there."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Mapping
from typing import Any

from gevent import monkey

SOCKET_KEYS = ("gunicorn.socket", "shoal.socket")   # the client socket, as gunicorn and ``shoal`` put it
_poll: Callable[[], Any] = monkey.get_original("select", "poll")   # a check that never yields to the hub


def client_socket(environ: Mapping[str, Any] | None) -> Any:
    if not environ:
        return None
    return next((environ[key] for key in SOCKET_KEYS if key in environ), None)


def peer_closed(sock: Any) -> bool:
    """EOF or reset on ``sock`` (like nginx's "client prematurely closed connection"); unknown → False."""
    if sock is None:
        return False
    try:
        fd = sock.fileno()
    except OSError:
        return True
    if fd < 0:
        return True
    poller = _poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    events = poller.poll(0)
    if not events:
        return False
    if events[0][1] & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
        return True
    try:
        return bool(sock.recv(1, socket.MSG_PEEK) == b"")   # readable: EOF, or bytes of a next request
    except (ValueError, BlockingIOError, InterruptedError):   # TLS sockets take no flags: alive, as far as known
        return False
    except OSError:
        return True
