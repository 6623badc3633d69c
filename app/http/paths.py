"""Which part of the URL space a path belongs to; the hooks treat meta and resource paths differently."""

from __future__ import annotations

from app.resources import ResourceKind


def is_meta(path: str) -> bool:
    """``/-/…`` endpoints: no negotiation, no discovery links."""
    return path.startswith("/-/")


# Cluster-wide reads that are resource paths too (readiness gate): 503 before the first sync.
CLUSTER_READS = frozenset({"/cluster", "/cluster/capacity", "/disk-usage", "/topology", "/topology/networks",
                           "/topology/placement"})


def is_resource(path: str) -> bool:
    first = path.strip("/").split("/", 1)[0]
    return ResourceKind.from_plural(first) is not None or path.rstrip("/") in CLUSTER_READS
