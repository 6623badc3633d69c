"""Removing a stack: its services, then its networks, secrets and configs (volumes are kept), as
``docker stack rm`` does, with what was removed and what failed counted for the answer.

Why a loop with a deadline: once a service is removed its tasks still run until their containers stop
(a second or two), and until then the engine refuses to remove the networks, configs and secrets they use
("in use by task"). Those removals are retried every ``interval`` until ``settle`` seconds have passed;
after that the refusal is reported in ``errors``. A member the engine no longer has is skipped, not an error.
When a service could not be removed its networks and the like will stay in use, so nothing is retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engine.writes import WriteFailure
from app.resources import ResourceKind

ORDER = (ResourceKind.SERVICE, ResourceKind.NETWORK, ResourceKind.SECRET, ResourceKind.CONFIG)
SETTLE_SECONDS = 20.0
INTERVAL = 0.5

Remove = Callable[[ResourceKind, str], None]


@dataclass
class Outcome:
    removed: dict[str, int] = field(default_factory=lambda: {kind.spec.plural: 0 for kind in ORDER})
    errors: list[dict[str, str]] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        """The answer (docs/writes-objects.md): ``{removed:{services,networks,configs,secrets}, errors?}``."""
        body: dict[str, Any] = {"removed": dict(self.removed)}
        if self.errors:
            body["errors"] = list(self.errors)
        return body


def remove_members(members: Mapping[ResourceKind, Sequence[str]], remove: Remove, *,
                   settle: float = SETTLE_SECONDS, interval: float = INTERVAL,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Remove every member in :data:`ORDER`; ``remove`` raises ``WriteFailure`` when the engine refuses."""
    outcome = Outcome()
    deadline = clock() + settle
    retry = True
    for kind in ORDER:
        pending = list(members.get(kind, ()))
        last: dict[str, WriteFailure] = {}
        while pending:
            waiting: list[str] = []
            for object_id in pending:
                try:
                    remove(kind, object_id)
                except WriteFailure as failure:
                    if failure.reason == "not_found":
                        continue
                    if failure.reason == "in_use" and retry and kind is not ResourceKind.SERVICE:
                        waiting.append(object_id)
                        last[object_id] = failure
                        continue
                    outcome.errors.append({"type": kind.value, "id": object_id, "error": failure.message})
                    if kind is ResourceKind.SERVICE:
                        retry = False
                    continue
                outcome.removed[kind.spec.plural] += 1
            if waiting and clock() + interval > deadline:
                outcome.errors.extend({"type": kind.value, "id": object_id, "error": last[object_id].message}
                                      for object_id in waiting)
                break
            if waiting:
                sleep(interval)
            pending = waiting
    return outcome
