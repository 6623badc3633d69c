"""The OpenAPI document: flask-smorest's spec from the views and schemas, completed once per app with
what decorators cannot say: the versioned media type, the HTML shell, conditional 304s and the servers.
"""

from __future__ import annotations

import copy
from typing import Any

from flask import Flask
from flask_smorest import Api

from app.http.negotiation import JSON, JSON_V1

API_KEY = "shoal.api"
_DOC_KEY = "shoal.openapi"
_DEFAULT_PROBLEM = {
    "description": "Any other error, as an RFC 9457 problem (codes at /api/errors).",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemV1"}}},
}
_HTML = {"text/html": {"schema": {"type": "string", "description": "the dashboard shell"}}}


class ShoalApi(Api):  # type: ignore[misc]
    """flask-smorest Api whose error handling is ours (``app.http.problems``), not its own."""

    def _register_error_handlers(self) -> None:
        return None


def _complete(document: dict[str, Any], base_path: str) -> dict[str, Any]:
    document = copy.deepcopy(document)
    document["servers"] = [{"url": base_path or "/"}]
    document.get("components", {}).get("responses", {}).pop("DEFAULT_ERROR", None)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if method != "get":
                continue
            responses = operation.setdefault("responses", {})
            responses["default"] = _DEFAULT_PROBLEM
            ok = responses.get("200", {})
            content = ok.get("content", {})
            if JSON in content and not path.startswith(("/-/", "/api")):
                content[JSON_V1] = copy.deepcopy(content[JSON])
                content.update(_HTML)
                responses.setdefault("304", {"description": "Not modified (If-None-Match / If-Modified-Since)."})
            if path in ("/api/errors", "/api/errors/{code}"):
                content[JSON_V1] = copy.deepcopy(content.get(JSON, {}))
                content.update(_HTML)
    return document


def openapi_document(app: Flask) -> dict[str, Any]:
    cached = app.extensions.get(_DOC_KEY)
    if cached is None:
        api: ShoalApi = app.extensions[API_KEY]
        cached = app.extensions[_DOC_KEY] = _complete(api.spec.to_dict(), app.config.get("SHOAL_BASE_PATH", ""))
    result: dict[str, Any] = cached
    return result
