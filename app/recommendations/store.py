"""The current findings, grouped by the object whose checks produced them, and what changed between two
evaluations of an object (appeared, updated, disappeared) for listeners such as SSE."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from app.recommendations.findings import Finding, sort_key

Subject = tuple[str, str]   # (resource type, resource id) whose checks produced the findings


class FindingAction(Enum):
    APPEARED = "appeared"
    UPDATED = "updated"         # same id, different message/severity/fix; firstSeen kept
    DISAPPEARED = "disappeared"


@dataclass(frozen=True, slots=True)
class FindingChange:
    action: FindingAction
    finding: Finding            # for DISAPPEARED: the finding as it was last reported


class FindingStore:
    def __init__(self) -> None:
        self._by_subject: dict[Subject, dict[str, Finding]] = {}
        self._all: dict[str, Finding] = {}
        self._seq = 0
        self._sorted: list[Finding] | None = None

    def replace(self, subject: Subject, findings: list[Finding], now: float) -> list[FindingChange]:
        """Make ``findings`` the subject's current ones; a finding already present keeps its firstSeen."""
        old = self._by_subject.get(subject, {})
        new: dict[str, Finding] = {}
        changes: list[FindingChange] = []
        for finding in findings:
            previous = old.get(finding.id)
            stored = finding      # a fresh object from a check: stamped here, never changed after
            if previous is None:
                self._seq += 1
                stored.first_seen, stored.seq = now, self._seq
                changes.append(FindingChange(FindingAction.APPEARED, stored))
            elif not finding.same_report(previous):
                stored.first_seen, stored.seq = previous.first_seen, previous.seq
                changes.append(FindingChange(FindingAction.UPDATED, stored))
            else:
                stored = previous
            new[stored.id] = stored
        for finding_id, finding in old.items():
            if finding_id not in new:
                changes.append(FindingChange(FindingAction.DISAPPEARED, finding))
                del self._all[finding_id]
        if new:
            self._by_subject[subject] = new
        else:
            self._by_subject.pop(subject, None)
        self._all.update(new)
        if changes:
            self._sorted = None
        return changes

    def subjects(self) -> list[Subject]:
        return list(self._by_subject)

    def get(self, finding_id: str) -> Finding | None:
        return self._all.get(finding_id)

    def sorted(self) -> list[Finding]:
        """Every finding, most severe first; memoised until the next change (callers must not mutate)."""
        if self._sorted is None:
            self._sorted = sorted(self._all.values(), key=sort_key)
        return self._sorted

    def __len__(self) -> int:
        return len(self._all)
