"""The OAuth 2.1 authorization server of the agent endpoint (auth mode other than ``none``)."""

from __future__ import annotations

from flask import Flask


def init_oauth(app: Flask) -> None:
    """Register the authorization server's routes (none yet)."""
