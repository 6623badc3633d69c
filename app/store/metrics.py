"""The state store's figures for ``/-/metrics`` (``app.selfmetrics`` yields them at scrape time)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from app.store.health import StoreState, StoreStatus


def store_metrics(status: StoreStatus) -> Iterator[Metric]:
    state = GaugeMetricFamily("shoal_store_state", "1 for the state store's current state (ok, failing: writes "
                              "fail and changes wait in memory, unavailable, off).", labels=["state"])
    for each in StoreState:
        state.add_metric([each.value], 1.0 if each is status.state else 0.0)
    yield state
    yield GaugeMetricFamily("shoal_store_pending_changes", "Changes not yet written to the state store.",
                            value=status.pending_changes)
    yield GaugeMetricFamily("shoal_store_pending_bytes", "Estimated bytes of the changes not yet written.",
                            value=status.pending_bytes)
    failing = 0.0 if status.failing_since is None else max(0.0, time.time() - status.failing_since)
    yield GaugeMetricFamily("shoal_store_failing_seconds", "Seconds since the state store's writes began to "
                            "fail (0 while they succeed).", value=failing)
    yield CounterMetricFamily("shoal_store_write_errors", "Failed state store writes.", value=status.write_errors)
    yield CounterMetricFamily("shoal_store_dropped_changes", "Pending changes dropped past the byte bound (the "
                              "file is then rewritten from the cache).", value=status.dropped_changes)
