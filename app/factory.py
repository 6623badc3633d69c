"""The application factory.

``create_app`` wires settings → Runtime → HTTP layer → blueprints and does no I/O: the Runtime (engine
client, watcher) is started by gunicorn's ``post_worker_init`` hook, the ``shoal`` command or a test
fixture, never at import time.
"""

from __future__ import annotations

import logging.config
import time
from pathlib import Path

from flask import Flask

from app.blueprints import auth as auth_views
from app.blueprints import cluster, events, history, insight, logs, meta, metrics, service_actions, spa, topology
from app.blueprints.node_writes import blp as node_writes_blp
from app.blueprints.object_writes import blp as object_writes_blp
from app.blueprints.oidc import blp as oidc_blp
from app.blueprints.plugins import blp as plugins_blp
from app.blueprints.resources import resource_blueprint
from app.blueprints.service_subresources import blp as service_subresources_blp
from app.blueprints.swarm import blp as swarm_blp
from app.config import Settings, load_settings
from app.dashboard import init_dashboard
from app.http import init_http
from app.http.admission import init_admission
from app.http.app_class import ShoalFlask
from app.http.auth import init_auth
from app.http.formats import FormatExtensions
from app.http.mount import BasePath
from app.http.response_memo import init_response_memo
from app.http.security import init_security
from app.logconfig import dict_config
from app.mcp import init_mcp
from app.oauth import init_oauth
from app.openapi import API_KEY, ShoalApi
from app.resources import ResourceKind
from app.runtime import EXTENSION_KEY, Runtime
from app.selfmetrics import init_self_metrics
from app.streams.response import init_streams
from app.version import VERSION

_ROOT = Path(__file__).resolve().parent.parent


def create_app(settings: Settings | None = None, *, configure_logging: bool = True) -> Flask:
    settings = settings or load_settings()
    if configure_logging:
        logging.config.dictConfig(dict_config(settings.log_level, settings.log_format))
    app = ShoalFlask(__name__, template_folder=str(_ROOT / "templates"), static_folder=str(_ROOT / "static"))
    app.config.update(
        SHOAL_BASE_PATH=settings.base_path,
        API_TITLE="Shoal", API_VERSION=VERSION, OPENAPI_VERSION="3.1.0",
        API_SPEC_OPTIONS={"info": {"description": "Docker Swarm state, cached and served as JSON-LD."}},
        JSON_SORT_KEYS=False,
        SHOAL_STARTED_AT=time.time(),   # floor of Last-Modified (app.http.respond.last_modified)
    )
    app.extensions[EXTENSION_KEY] = runtime = Runtime(settings)
    init_streams(app, runtime.cache, settings)
    init_http(app)
    init_auth(app)        # before the admission gate: a request is authenticated before it queues
    init_security(app, tls=settings.tls_enabled)
    init_self_metrics(app)
    init_admission(app)   # after the other hooks; its WSGI layer innermost (app.http.admission)
    init_dashboard(app)   # text/html on every resource URL: the pages (app.dashboard)
    api = ShoalApi(app)
    app.extensions[API_KEY] = api
    for blueprint in (meta.blp, spa.blp, events.blp, *(resource_blueprint(kind) for kind in ResourceKind),
                      history.blp, insight.blp, service_actions.blp, metrics.blp, cluster.blp, topology.blp, logs.blp):
        api.register_blueprint(blueprint)
    for blueprint in (node_writes_blp, object_writes_blp):   # writes on the resources' own rules
        api.register_blueprint(blueprint)
    api.register_blueprint(service_subresources_blp)   # /services/<id>/<sub>: GET, PUT, PATCH
    for blueprint in (swarm_blp, plugins_blp):   # /swarm and /plugins: engine reads and gated writes
        api.register_blueprint(blueprint)
    api.register_blueprint(oidc_blp)   # /auth/login, /auth/callback, /auth/logout (404 unless auth.mode = oidc)
    api.register_blueprint(auth_views.blp)   # /auth/whoami, /profile
    if settings.mcp_enabled:
        init_mcp(app)      # /mcp (docs/agents.md)
        if settings.auth_mode != "none":
            init_oauth(app)   # /oauth/*, /.well-known/oauth-* (the agents' authorization server)
    wsgi = FormatExtensions(app.wsgi_app)
    app.wsgi_app = BasePath(wsgi, settings.base_path) if settings.base_path else wsgi  # type: ignore[method-assign]
    init_response_memo(app, runtime)   # outermost: a memoised answer skips every layer above (docs/performance.md)
    return app
