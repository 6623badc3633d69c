"""Recommendation findings as events on ``/recommendations`` streams (findings appear and disappear
live; docs/streams.md).

The engine calls the listener after each evaluation slice with what appeared, changed or disappeared; one
frame is built per call and offered to every ``/recommendations`` stream through the hub (same queues, cap,
keepalive and cleanup as change streams). Event name ``recommendation``; ``data`` has the change-event shape
with ``type`` ``recommendation``, ``action`` create/update/remove (appeared/updated/disappeared) and the
finding as in ``/recommendations`` as ``resource`` (for remove: as last reported). Findings are not in the
history ring, so a ``Last-Event-ID`` on this stream always gets ``sync`` (refetch ``/recommendations``).
A restricted caller gets only the findings it may read (their ACL key: the service, the node, else
``swarm:cluster``; ``app.streams.acl``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from app.recommendations.engine import RecommendationEngine
from app.recommendations.store import FindingAction, FindingChange
from app.streams.acl import may_read_finding
from app.streams.events import ScopeKey
from app.streams.hub import Hub
from app.streams.wire import batch_frame, encode_json

RECOMMENDATIONS: ScopeKey = ("recommendations",)
EVENT = "recommendation"
ACTIONS = {FindingAction.APPEARED: "create", FindingAction.UPDATED: "update", FindingAction.DISAPPEARED: "remove"}


def finding_event(change: FindingChange, base: str) -> dict[str, Any]:
    finding = change.finding
    return {"@id": f"{base}/recommendations#{quote(finding.id, safe=':')}", "@type": "Finding", "type": EVENT,
            "action": ACTIONS[change.action], "id": finding.id, "resource": finding.to_json(base)}


def publish(hub: Hub, changes: list[FindingChange]) -> None:
    """One frame for the slice's changes, to every recommendations stream (nothing to do without one)."""
    if not changes or not hub.wants(RECOMMENDATIONS):
        return
    seq = hub.cache.history.last_seq   # ids of this stream only order it: replay always answers sync
    encoded = [(EVENT, encode_json(finding_event(c, hub.base_path))) for c in changes]
    full: bytes | None = None
    for client in hub.clients():
        if RECOMMENDATIONS not in client.scopes:
            continue
        if client.access is None:
            full = full or batch_frame(seq, encoded)
            client.offer(full, seq)
            continue
        mine = [item for item, change in zip(encoded, changes, strict=True)
                if may_read_finding(client.access, hub.cache, change.finding)]
        if mine:
            client.offer(batch_frame(seq, mine), seq)


def attach(hub: Hub, engine: RecommendationEngine) -> Callable[[], None]:
    return engine.subscribe(lambda changes: publish(hub, changes))
