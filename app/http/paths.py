"""Which part of the URL space a path belongs to; the hooks treat meta and resource paths differently."""

from __future__ import annotations

from app.resources import ResourceKind


def is_meta(path: str) -> bool:
    """``/-/…`` endpoints: no negotiation, no discovery links."""
    return path.startswith("/-/")


def is_resource(path: str) -> bool:
    first = path.strip("/").split("/", 1)[0]
    return ResourceKind.from_plural(first) is not None
