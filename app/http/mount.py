"""WSGI shim for ``server.base_path``: requests outside the prefix are 404; inside, the prefix moves
from PATH_INFO to SCRIPT_NAME so routes are declared without it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from werkzeug.exceptions import NotFound


class BasePath:
    def __init__(self, app: Any, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        if path == self.prefix or path.startswith(self.prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
            environ["PATH_INFO"] = path[len(self.prefix):] or "/"
            result: Iterable[bytes] = self.app(environ, start_response)
            return result
        response: Iterable[bytes] = NotFound()(environ, start_response)
        return response
