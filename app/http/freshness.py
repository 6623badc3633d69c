"""The headers that tell a client how fresh the cached state is (documented in the README), in one place:
``app.http.respond`` adds them to every cached read, ``app.http.response_memo`` to every memoised one."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from app.cache.store import Freshness

SEQUENCE_HEADER = "Cache-Sequence"
CONTACT_HEADER = "Engine-Last-Contact"
FRESHNESS_HEADER = "Cache-Freshness"


@lru_cache(maxsize=4)
def _contact_text(timestamp: float) -> str:
    """The last contact moves every few seconds while answers are made thousands of times a second."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def freshness_headers(fresh: Freshness) -> list[tuple[str, str]]:
    headers = [(SEQUENCE_HEADER, str(fresh.seq))]
    if fresh.last_contact is not None:
        headers.append((CONTACT_HEADER, _contact_text(fresh.last_contact)))
    headers.append((FRESHNESS_HEADER, "live" if fresh.connected and fresh.synced else "stale"))
    return headers
