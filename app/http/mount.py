"""WSGI shim for ``server.base_path``: requests outside the prefix are a 404 problem; inside, the prefix
moves from PATH_INFO to SCRIPT_NAME so routes are declared without it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any


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
        request_id = uuid.uuid4().hex
        body = json.dumps({
            "@context": f"{self.prefix}/api/context.jsonld", "@id": path, "@type": "Problem",
            "type": "about:blank", "title": "Not Found", "status": 404,
            "detail": f"This service is served under {self.prefix}/.", "instance": path, "requestId": request_id,
        }).encode()
        start_response("404 Not Found", [("Content-Type", "application/problem+json"),
                                         ("Content-Length", str(len(body))), ("Request-Id", request_id),
                                         ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
        return [body]
