"""The agent-tool endpoint (MCP, streamable HTTP) at ``{base_path}/mcp`` (docs/agent-transport.md).

The parts meet in ``app.mcp.registry``: importing a part registers its JSON-RPC methods; a part that needs
the app (a cache listener, a notification fan-out) exposes ``init(app)``, called here once.
"""

from __future__ import annotations

import importlib

from flask import Flask

PARTS = ("app.mcp.lifecycle", "app.mcp.resources", "app.mcp.completion", "app.mcp.notifications",
         "app.mcp.tools")


def init_mcp(app: Flask) -> None:
    """Register every part's methods, run their ``init(app)``, and route ``/mcp``."""
    from app.mcp.metrics import McpCollector
    from app.mcp.transport import init_transport
    from app.selfmetrics import register_collector

    for name in PARTS:
        module = importlib.import_module(name)
        init = getattr(module, "init", None)
        if callable(init):
            init(app)
    init_transport(app)
    register_collector(app, McpCollector(app))   # shoal_mcp_* on /-/metrics
