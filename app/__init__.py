"""Shoal: the Docker Swarm state as a JSON-LD REST service.

Importing the package stays cheap and side-effect free (the ``shoal`` command must monkey-patch with
gevent before sockets, ssl or the docker SDK are imported); the factory lives in ``app.factory``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from app.config import Settings


def create_app(settings: Settings | None = None, *, configure_logging: bool = True) -> Flask:
    from app.factory import create_app as build

    return build(settings, configure_logging=configure_logging)
