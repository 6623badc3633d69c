"""Labels of log lines from the cache: the service name and the task's slot, so merged stack logs and
text downloads say which replica wrote each line (``demo_web.2``) without another engine call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.cache.entries import dig
from app.cache.store import Cache
from app.cooperate import pause
from app.logs.lines import LogLine
from app.resources import ResourceKind


class Labeller:
    """Adds ``serviceName`` and ``slot`` to line attrs; one cache lookup per task id (memoised)."""

    __slots__ = ("_cache", "_known")

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._known: dict[str, dict[str, Any]] = {}

    def label(self, line: LogLine) -> LogLine:
        task_id = line.attrs.get("taskId")
        if not isinstance(task_id, str):
            return line
        labels = self._known.get(task_id)
        if labels is None:
            labels = self._known[task_id] = self._labels_of(task_id)
        line.attrs.update(labels)
        return line

    def label_all(self, lines: Iterable[LogLine]) -> list[LogLine]:
        labelled = []
        for index, line in enumerate(lines, 1):
            labelled.append(self.label(line))
            if index % 2000 == 0:
                pause()   # a 10,000-line page: yield to the hub between parts
        return labelled

    def _labels_of(self, task_id: str) -> dict[str, Any]:
        labels: dict[str, Any] = {}
        task = self._cache.get(ResourceKind.TASK, task_id)
        service_id = dig(task.raw, "ServiceID") if task is not None else None
        service = self._cache.get(ResourceKind.SERVICE, service_id) if isinstance(service_id, str) else None
        if service is not None:
            labels["serviceName"] = service.name
        slot = dig(task.raw, "Slot") if task is not None else None
        if isinstance(slot, int) and slot > 0:
            labels["slot"] = slot
        return labels
