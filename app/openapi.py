"""The OpenAPI document: flask-smorest's spec from the views and schemas, completed once per app with
what decorators cannot say: the versioned media type, the HTML shell, conditional 304s and the servers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from flask import Flask
from flask_smorest import Api

from app.blueprints.docs import IDEMPOTENCY_KEY, IDEMPOTENT_MARKER
from app.blueprints.oidc import document_login_redirects
from app.http.auth import BYPASS_PREFIXES
from app.http.cors import document_preflight
from app.http.feed_docs import document_feeds
from app.http.negotiation import JSON, JSON_V1
from app.http.options import document_options
from app.schemas.jsonld_keys import separate_component_keywords, separate_nested_keywords
from app.streams.openapi_doc import document_streams

API_KEY = "shoal.api"
_DOC_KEY = "shoal.openapi"
_DEFAULT_PROBLEM = {
    "description": "Any other error, as an RFC 9457 problem (codes at /api/errors).",
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemV1"}}},
}
_HTML = {"text/html": {"schema": {"type": "string", "description": "the dashboard's page of this URL"}}}
_HTML_PROBLEM = {"text/html": {"schema": {"type": "string",
                                          "description": "the dashboard's page of this URL, showing the problem"}}}
# Every authenticated operation (all but app.http.auth.BYPASS_PREFIXES) may answer 401 AUT001 when auth.mode is on.
_UNAUTHENTICATED = {
    "description": "AUT001: no valid credentials (auth.mode other than none).",
    "headers": {"WWW-Authenticate": {"schema": {"type": "string"},
                                     "description": "The mode's challenge when it has one (Bearer for oidc, "
                                                    "Proxy for headers; none for cert: mTLS has no scheme)."}},
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemV1"}}},
}


class ShoalApi(Api):  # type: ignore[misc]
    """flask-smorest Api whose error handling is ours (``app.http.problems``), not its own, and whose spec is
    completed when first read, not when the app is built.

    Documenting the views (schemas to JSON Schema, ~180 ms) and flask-smorest's default responses (an
    error schema resolved for each of 63 HTTP statuses, ~35 ms) serves only ``/api`` and ``/api/asyncapi``:
    a worker that never answers them never pays it. The deferred steps run in the order flask-smorest
    would have run them (its default components, then each blueprint as registered), so the spec is the
    same."""

    def __init__(self, app: Flask) -> None:
        self._deferred: list[Callable[[], None]] = []   # flask-smorest's own components, not registered yet
        self._pending: list[tuple[Any, str, Any]] = []   # (blueprint, name, parameters) not documented yet
        self._spec: Any = None
        self._completing = False
        super().__init__(app)

    @property
    def spec(self) -> Any:
        """flask-smorest's APISpec, with its default components and every blueprint registered so far in it."""
        if self._completing or not (self._deferred or self._pending):
            return self._spec
        self._completing = True   # the steps read the spec themselves
        try:
            while self._deferred:
                self._deferred.pop(0)()
            while self._pending:
                blp, name, parameters = self._pending.pop(0)
                blp.register_views_in_doc(self, self._app, self._spec, name=name, parameters=parameters)
                self._spec.tag({"name": name, "description": blp.description})
        finally:
            self._completing = False
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:   # flask-smorest's own __init__ and _init_spec assign it
        self._spec = value

    def _register_responses(self) -> None:
        self._deferred.append(super()._register_responses)

    def _register_etag_headers(self) -> None:
        self._deferred.append(super()._register_etag_headers)

    def _register_pagination_header(self) -> None:
        self._deferred.append(super()._register_pagination_header)

    def register_blueprint(self, blp: Any, *, parameters: Any = None, **options: Any) -> None:
        """``Api.register_blueprint`` with the documentation of the views left to the first read of the spec."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        self._pending.append((blp, name, parameters))

    def _register_error_handlers(self) -> None:
        return None


_OBJECT = {"schema": {"type": "object"}}
# Media types of the endpoints that answer documents no marshmallow schema describes.
_FIXED_CONTENT: dict[str, dict[str, Any]] = {
    "/": {},  # the dashboard shell only (added below, as for every negotiated GET)
    "/-/health": {JSON: _OBJECT},
    "/-/ready": {JSON: {"schema": {"type": "object", "required": ["status", "unauthenticatedWrites"], "properties": {
        "status": {"type": "string", "enum": ["ready", "not_ready"]},
        "unauthenticatedWrites": {"type": "boolean", "description": "auth.mode = none with operations level >= 1 "
                                  "on an address other than loopback: anyone who reaches the port may write"}}}}},
    "/-/metrics": {"text/plain": {"schema": {"type": "string"}}},
    "/api": {JSON: _OBJECT},
    "/api/context.jsonld": {"application/ld+json": _OBJECT},
}


def _complete(document: dict[str, Any], base_path: str) -> dict[str, Any]:
    document = copy.deepcopy(document)
    document["servers"] = [{"url": base_path or "/"}]
    document.get("components", {}).get("responses", {}).pop("DEFAULT_ERROR", None)
    for path, operations in document.get("paths", {}).items():
        for method, other in operations.items():   # writes: flask-smorest's default points at DEFAULT_ERROR
            if method != "parameters" and isinstance(other, dict) and not path.startswith(BYPASS_PREFIXES):
                other.setdefault("responses", {}).setdefault("401", copy.deepcopy(_UNAUTHENTICATED))
            if method not in ("get", "parameters") and isinstance(other, dict):
                other.setdefault("responses", {})["default"] = _DEFAULT_PROBLEM
                if other.pop(IDEMPOTENT_MARKER, False):   # every write of the operation table
                    other.setdefault("parameters", []).append(copy.deepcopy(IDEMPOTENCY_KEY))
        operation = operations.get("get")
        if operation is None:
            continue
        responses = operation.setdefault("responses", {})
        responses["default"] = _DEFAULT_PROBLEM
        for status, response in responses.items():
            if status in ("200", "503") and path in _FIXED_CONTENT:
                response["content"] = copy.deepcopy(_FIXED_CONTENT[path])
        content = responses.setdefault("200", {"description": "OK"}).setdefault("content", {})
        if path.startswith("/-/"):
            continue  # meta endpoints are not negotiated
        if JSON in content and not path.startswith("/api"):
            responses.setdefault("304", {"description": "Not modified (If-None-Match / If-Modified-Since)."})
        if JSON in content and (not path.startswith("/api") or path.startswith("/api/errors")):
            content[JSON_V1] = copy.deepcopy(content[JSON])
        if _takes_range(operation):
            responses["206"] = {"description": "Part of the collection (Range: items a-b).",
                                "headers": {"Content-Range": {"schema": {"type": "string"},
                                                              "description": "items <first>-<last>/<total>"}},
                                "content": copy.deepcopy(content)}
        content.update(copy.deepcopy(_HTML))
        for status, response in responses.items():   # a browser gets the page of a problem at its status
            if status[0] in "45" and "application/problem+json" in response.get("content", {}):
                response["content"].update(copy.deepcopy(_HTML_PROBLEM))
    document_feeds(document)
    document_streams(document, base_path)
    document_login_redirects(document)
    document_options(document, _UNAUTHENTICATED, _DEFAULT_PROBLEM)
    document_preflight(document)
    separate_component_keywords(document.get("components", {}).get("schemas", {}))  # generators: @id vs id
    separate_nested_keywords(document)   # the same inside inline and nested schemas
    return document


def _takes_range(operation: dict[str, Any]) -> bool:
    return any(p.get("in") == "header" and p.get("name") == "Range" for p in operation.get("parameters", []))


def openapi_document(app: Flask) -> dict[str, Any]:
    cached = app.extensions.get(_DOC_KEY)
    if cached is None:
        api: ShoalApi = app.extensions[API_KEY]
        cached = app.extensions[_DOC_KEY] = _complete(api.spec.to_dict(), app.config.get("SHOAL_BASE_PATH", ""))
    result: dict[str, Any] = cached
    return result
