"""SSE framing (the WHATWG event-stream format): the only place bytes of a stream are composed.

Data is always compact JSON (no raw newlines: JSON escapes them inside strings), ``id`` is a decimal
sequence number and ``event`` a fixed type name, so no field needs splitting or stripping; ``frame``
still refuses a newline in the name, which would corrupt the stream for every later event.
"""

from __future__ import annotations

import json
from typing import Any

KEEPALIVE = b":keepalive\n\n"
RETRY_MS = 3000
RETRY = f"retry: {RETRY_MS}\n\n".encode()
SYNC_EVENT = "sync"
BATCH_EVENT = "batch"
SYNC_DATA: dict[str, Any] = {"type": "sync", "action": "full_sync", "id": ""}


def encode_json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def frame(seq: int, event: str, data: bytes) -> bytes:
    if "\n" in event or "\r" in event:
        raise ValueError("an SSE event name cannot contain a line break")
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, event.encode(), data)


def batch_frame(seq: int, events: list[tuple[str, bytes]]) -> bytes:
    """One event as itself (named by its type), several as one ``batch`` whose data is a JSON array;
    ``seq`` is the highest sequence number among them."""
    if len(events) == 1:
        name, data = events[0]
        return frame(seq, name, data)
    return frame(seq, BATCH_EVENT, b"[" + b",".join(data for _, data in events) + b"]")


_SYNC_BYTES = encode_json(SYNC_DATA)


def sync_frame(seq: int) -> bytes:
    """``full_sync`` under the event name ``sync``: the client must refetch; its id resumes the stream."""
    return frame(seq, SYNC_EVENT, _SYNC_BYTES)
