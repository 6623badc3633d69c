"""The app's log-stream state: the 128-stream cap (``StreamSlots``) and the engine log client.

Kept in ``app.extensions`` (no module-level state), created when the logs blueprint is registered;
the engine client itself is only made on first use, inside the worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, current_app

from app.engine.logs import EngineLogs
from app.http.live import StreamSlots, stream_slots
from app.runtime import runtime_of

LOG_STREAM_CAP = 128
_EXTENSION_KEY = "shoal.logs"


@dataclass(slots=True)
class LogFacility:
    slots: StreamSlots
    engine: EngineLogs
    keepalive: float


def init_logs(app: Flask) -> LogFacility:
    existing = app.extensions.get(_EXTENSION_KEY)
    if isinstance(existing, LogFacility):
        return existing
    settings = runtime_of(app).settings
    facility = LogFacility(stream_slots(app, "log", LOG_STREAM_CAP, "LOG001"),
                           EngineLogs(settings.docker_host, settings.docker_api_version, LOG_STREAM_CAP),
                           settings.sse_keepalive)
    app.extensions[_EXTENSION_KEY] = facility
    return facility


def log_facility(app: Flask | None = None) -> LogFacility:
    return init_logs(app or current_app)
