"""The metrics proxy of one app: its Prometheus client (``None`` without ``prometheus.url``) and the slots
of its live streams (cap 64, ``MTR005``). Made on first use from the app's settings and kept in
``app.extensions`` (one per app, like the Runtime; no module-level state)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from flask import Flask

from app.http.live import StreamSlots, stream_slots
from app.metrics.upstream import PrometheusClient
from app.runtime import runtime_of

EXTENSION_KEY: Final = "shoal.metrics_proxy"   # not "shoal.metrics": the self metrics (app.selfmetrics)
STREAM_CAP: Final = 64


@dataclass(frozen=True, slots=True)
class MetricsProxy:
    client: PrometheusClient | None
    slots: StreamSlots


def metrics_of(app: Flask) -> MetricsProxy:
    """No yield between the lookup and the store: one proxy per app under any interleaving."""
    proxy = app.extensions.get(EXTENSION_KEY)
    if not isinstance(proxy, MetricsProxy):
        url = runtime_of(app).settings.prometheus_url
        proxy = MetricsProxy(PrometheusClient(url) if url else None,
                             stream_slots(app, "metrics", STREAM_CAP, "MTR005"))
        app.extensions[EXTENSION_KEY] = proxy
    return proxy
