"""Placement constraints of a service spec, parsed once per evaluation of the service.

Only what the checks need: ``node.labels.<key>`` / ``engine.labels.<key>`` references (a label no node has
makes an ``==`` constraint unsatisfiable) and ``node.hostname`` / ``node.id`` equalities (the service is
pinned to that node).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_CONSTRAINT = re.compile(r"\s*([A-Za-z0-9_.\-]+)\s*(==|!=)\s*(.*?)\s*")


@dataclass(frozen=True, slots=True)
class LabelReference:
    source: str        # "node" or "engine"
    key: str
    equal: bool        # == (True) or != (False)
    value: str

    @property
    def text(self) -> str:
        return f"{self.source}.labels.{self.key} {'==' if self.equal else '!='} {self.value}"


@dataclass(frozen=True, slots=True)
class Placement:
    labels: tuple[LabelReference, ...] = ()
    pinned_to: frozenset[str] = field(default_factory=frozenset)   # hostnames and node ids (==)


def constraints_of(raw: Mapping[str, Any]) -> list[str]:
    placement = ((raw.get("Spec") or {}).get("TaskTemplate") or {}).get("Placement") or {}
    constraints = placement.get("Constraints") or []
    return [c for c in constraints if isinstance(c, str)]


def parse_placement(raw: Mapping[str, Any]) -> Placement:
    labels: list[LabelReference] = []
    pinned: set[str] = set()
    for constraint in constraints_of(raw):
        match = _CONSTRAINT.fullmatch(constraint)
        if match is None:
            continue
        subject, operator, value = match[1], match[2], match[3]
        for source in ("node", "engine"):
            prefix = f"{source}.labels."
            if subject.startswith(prefix) and len(subject) > len(prefix):
                labels.append(LabelReference(source, subject[len(prefix):], operator == "==", value))
        if operator == "==" and subject in ("node.hostname", "node.id"):
            pinned.add(value)
    return Placement(tuple(labels), frozenset(pinned))
