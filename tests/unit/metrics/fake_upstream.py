"""A tiny fake Prometheus on 127.0.0.1 (gevent's WSGI server): each path answers as a test tells it to."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import gevent
from gevent.pywsgi import WSGIServer

StartResponse = Callable[..., Any]
Handler = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def json_answer(body: Any, status: str = "200 OK") -> Handler:
    def handle(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]
    return handle


class FakePrometheus:
    """Routes by PATH_INFO; records every request's path and query string."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.requests: list[tuple[str, str]] = []
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)

    def __enter__(self) -> FakePrometheus:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        self.requests.append((environ["PATH_INFO"], environ.get("QUERY_STRING", "")))
        handler = self.routes.get(environ["PATH_INFO"])
        if handler is None:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"404 page not found"]
        return handler(environ, start_response)


def endless(chunk: bytes) -> Handler:
    """A 200 whose body never ends (chunked): only a size cap or a deadline stops a reader."""
    def handle(environ: dict[str, Any], start_response: StartResponse) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        while True:
            yield chunk
            gevent.sleep(0)   # a yield between chunks (the server stays responsive), not a wait
    return handle


def slow(seconds: float) -> Handler:
    def handle(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        gevent.sleep(seconds)   # a deliberately slow upstream: the delay is what the test is about
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"status":"success","data":[]}']
    return handle
