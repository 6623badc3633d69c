"""The agent-tool endpoint (MCP, streamable HTTP) at ``{base_path}/mcp``."""

from __future__ import annotations

from flask import Flask


def init_mcp(app: Flask) -> None:
    """Register the endpoint (not built yet)."""
