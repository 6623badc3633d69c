"""The Prometheus side of Shoal: a bounded HTTP client for the configured Prometheus (``upstream``), the
parameter rules of ``/metrics`` (``params``), the live metrics stream (``stream``), what ``/metrics/status``
and ``/cluster/metrics`` compute from Prometheus (``status``, ``usage``), and the cAdvisor label names that
per-container metrics are expected to carry (``cadvisor``).

Flow: blueprint (``app.blueprints.metrics``) → ``app.http.metrics`` (responses, problems) → this package →
Prometheus. Nothing here reads the engine or the cache.
"""
