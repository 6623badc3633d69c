"""The agent endpoint's figures on ``/-/metrics``: sessions, their open GET streams and listen streams.

Operators see how many agents are connected; tests wait on a stream being open instead of sleeping."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Flask
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.mcp.sessions import table_of


class McpCollector(Collector):
    def __init__(self, app: Flask) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        table = table_of(self._app)
        sessions = list(table.sessions.values())
        yield GaugeMetricFamily("shoal_mcp_sessions", "Open MCP handshake sessions.", value=len(sessions))
        yield GaugeMetricFamily("shoal_mcp_session_streams", "MCP sessions with their GET stream open.",
                                value=sum(1 for session in sessions if session.stream is not None))
        yield GaugeMetricFamily("shoal_mcp_listen_streams", "Open MCP subscriptions/listen streams.",
                                value=len(table.listeners))
