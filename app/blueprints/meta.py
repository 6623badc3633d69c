"""Meta endpoints: liveness, readiness (with how stale the cache may be), self-metrics, the OpenAPI
document, the JSON-LD context and the browsable error-code registry."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from flask import Response, current_app
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.exceptions import NotFound

from app.blueprints.docs import errors
from app.config.exposure import unauthenticated_writes
from app.errors import REGISTRY
from app.http import respond
from app.http.jsonld import context_document, envelope
from app.http.negotiation import negotiated
from app.http.response_memo import offer
from app.openapi import openapi_document
from app.runtime import current_runtime
from app.schemas.v1.envelopes import ErrorCollectionV1, ErrorDefV1
from app.selfmetrics import render_metrics
from app.version import VERSION, build_info

blp = Blueprint("meta", __name__, description="Health, readiness, metrics and API documentation.")
STATIC_CACHE = "public, max-age=3600"


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@blp.route("/-/health")
class Health(MethodView):
    @blp.response(200, description="The process is alive; status is error until the first engine sync.")
    def get(self) -> Response:
        runtime, build = current_runtime(), build_info()
        body = {**envelope(runtime.settings.base_path, "/-/health", "Health"),
                "status": "ok" if runtime.cache.freshness.synced else "error",
                "version": VERSION, "commit": build.commit, "buildDate": build.build_date,
                "operationsLevel": runtime.settings.operations_level}
        cache = runtime.cache
        offer(lambda: cache.freshness.synced, no_store=True)   # probes: the same bytes until the first sync
        return respond.document(body, content_type="application/json", cache_control="no-store")


@blp.route("/-/ready")
class Ready(MethodView):
    @blp.response(200, description="Synced and connected to the engine. `store` is the state store's health: "
                  "`failing` while its writes fail (changes wait in memory); that does not make the service "
                  "unready, its reads stay correct.")
    @blp.alt_response(503, description="Not synced yet, or the engine connection is lost (state is stale).")
    def get(self) -> Response:
        runtime = current_runtime()
        fresh = runtime.cache.freshness
        ready = fresh.synced and fresh.connected
        behind = None if fresh.last_contact is None else round(max(0.0, time.time() - fresh.last_contact), 3)
        body: dict[str, Any] = {
            **envelope(runtime.settings.base_path, "/-/ready", "Readiness"),
            "status": "ready" if ready else "not_ready",
            "synced": fresh.synced, "engineConnected": fresh.connected,
            "lastEngineContact": _iso(fresh.last_contact), "lastFullSync": _iso(fresh.last_sync),
            "lastFullSyncMs": None if fresh.last_sync_duration is None
            else round(fresh.last_sync_duration * 1000, 1),
            # While connected, events keep the cache within a second or two of the engine; once the
            # connection is lost, the state may be as old as the last contact.
            "maxStalenessSeconds": behind if not ready else None,
            "sequence": fresh.seq,
            "store": runtime.store_status().document(),   # app.store.health: ok, failing, unavailable, off
            # anyone who reaches the port may write (app.config.exposure): said at start, shown here
            "unauthenticatedWrites": unauthenticated_writes(runtime.settings, runtime.binds),
        }
        return respond.document(body, status=200 if ready else 503, content_type="application/json",
                                cache_control="no-store")


@blp.route("/-/metrics")
class Metrics(MethodView):
    @blp.response(200, description="Prometheus text exposition of the service's own metrics.",
                  content_type="text/plain")
    @blp.alt_response(404, description="Self metrics are disabled (server.self_metrics = false).")
    def get(self) -> Response:
        if not current_runtime().settings.self_metrics:
            raise NotFound("Self metrics are disabled (server.self_metrics).")
        return render_metrics(current_app)


@blp.route("/api")
class OpenApi(MethodView):
    @blp.response(200, description="This OpenAPI document.")
    @errors(blp)
    @negotiated()
    def get(self) -> Response:
        return respond.document(openapi_document(current_app), content_type="application/json",
                                cache_control=STATIC_CACHE)


@blp.route("/api/context.jsonld")
class Context(MethodView):
    @blp.response(200, description="The JSON-LD context.", content_type="application/ld+json")
    @errors(blp)
    @negotiated()
    def get(self) -> Response:
        base = current_runtime().settings.base_path
        return respond.document(context_document(base), content_type="application/ld+json",
                                cache_control=STATIC_CACHE)


def _error_def(code: str, base: str) -> dict[str, Any]:
    definition = REGISTRY[code]
    return {**envelope(base, f"/api/errors/{code}", "ErrorDef"), "code": code, "title": definition.title,
            "status": definition.status, "description": definition.description,
            "suggestion": definition.suggestion}


@blp.route("/api/errors")
class ErrorList(MethodView):
    @blp.response(200, ErrorCollectionV1, description="Every error code the service can answer with.")
    @errors(blp)
    @negotiated()
    def get(self) -> Response:
        base = current_runtime().settings.base_path
        items = [_error_def(code, base) for code in sorted(REGISTRY)]
        body = {**envelope(base, "/api/errors", "Collection"), "items": items, "total": len(items),
                "limit": len(items), "offset": 0}
        return respond.document(body)


@blp.route("/api/errors/<code>")
class ErrorDetail(MethodView):
    @blp.response(200, ErrorDefV1, description="One error code.")
    @errors(blp, 404)
    @negotiated()
    def get(self, code: str) -> Response:
        if code not in REGISTRY:
            raise NotFound(f"No error code {code!r}.")
        return respond.document(_error_def(code, current_runtime().settings.base_path))
