"""WSGI shim for ``server.base_path``: inside the prefix, the prefix moves from PATH_INFO to SCRIPT_NAME
so routes are declared without it; outside it, the request is flagged and answered by the app's own
404 handling, so it still gets the problem body, Request-Id and security headers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

OUTSIDE_KEY = "shoal.outside_base_path"


class BasePath:
    def __init__(self, app: Any, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        if path == self.prefix or path.startswith(self.prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
            environ["PATH_INFO"] = path[len(self.prefix):] or "/"
        else:
            environ[OUTSIDE_KEY] = True
        result: Iterable[bytes] = self.app(environ, start_response)
        return result
