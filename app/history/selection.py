"""Which records a history page or feed shows: filters, the ``before`` cursor, ``limit``, a bounded scan.

Pages are newest first. ``before`` is a sequence number (exclusive): the next page's cursor is the
sequence number of the last entry shown, so pages never overlap or skip, whatever is recorded meanwhile.

A filtered page walks the ring from the cursor down until it has ``limit + 1`` matches (the extra one only
says whether an older page exists). The walk examines at most ``SCAN_BUDGET`` records per request, so one
request never walks a large ring (up to 1,000,000 records): when the budget runs out first, the page is
cut there, possibly short or empty, and its ``next`` cursor continues the walk where it stopped.

Parameters (docs/history-and-feeds.md): ``type`` (a kind), ``resourceId`` (exact
id; stacks and volumes by name), ``action`` (a comma-separated list of create, update, remove, ref_changed);
a bad value is a 400 ``API012``. Without ``action`` a page shows changes of the objects themselves
(``DEFAULT_ACTIONS``: create, update, remove): related changes (``ref_changed``, a task or a referenced
object changed) flood the history when a service crash-loops, so they are shown on request only.
``before``: ASCII digits (more than 18: newest); anything else is ``API012``. ``limit``: 1..200, default 50,
larger values clamped, invalid ones ignored (as on the lists).

ACL: ``HistoryFilter.readable`` (the caller's read predicate over records, ``app.http.acl_read``) is one
more filter, judged per record inside the walk, so a page holds ``limit`` readable entries and its cursor
stays exact (filtering after the limit would give short pages and tell how many were
hidden). It is evaluated last, after the cheap filters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.cache.entries import dig
from app.cache.history import Action, Change, History
from app.cache.store import Cache
from app.errors import ProblemError
from app.query.paging import DEFAULT_LIMIT, HUGE, MAX_LIMIT, client_int
from app.resources import STACK_LABEL, ResourceKind
from app.schemas.query_params import PYTHON_WHITESPACE

SCAN_BUDGET = 5_000
Match = Callable[[Change], bool]
_KINDS = {kind.value: kind for kind in ResourceKind}
_ACTIONS = {action.value: action for action in Action}
DEFAULT_ACTIONS = frozenset({Action.CREATE, Action.UPDATE, Action.REMOVE})
MAX_ACTION_NAMES = 8                    # repeats allowed (harmless), a list without bound is not
# Blanks around a name are stripped (str.strip(): Python's white space), so the pattern allows them.
_ONE_ACTION = f"[{PYTHON_WHITESPACE}]*(" + "|".join(_ACTIONS) + f")[{PYTHON_WHITESPACE}]*"
ACTION_PATTERN = f"^{_ONE_ACTION}(,{_ONE_ACTION}){{0,{MAX_ACTION_NAMES - 1}}}$"
ACTION_DESCRIPTION = ("only entries of these actions, comma-separated, at most 8 (API012 otherwise); default "
                      "create,update,remove: related changes (ref_changed) are shown on request only")
_STACK_MEMBERS = (ResourceKind.SERVICE, ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK,
                  ResourceKind.VOLUME, ResourceKind.TASK)


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    kind: ResourceKind | None = None
    object_id: str | None = None
    action: frozenset[Action] | None = None   # None: every action (callers that select by scope alone)
    scope: Match | None = None          # a predicate beyond the flat filters (a stack's members, a search)
    readable: Match | None = None       # the ACL: records the caller may read (None: all)

    def matches(self, change: Change) -> bool:
        return ((self.kind is None or change.kind is self.kind)
                and (self.object_id is None or change.id == self.object_id)
                and (self.action is None or change.action in self.action)
                and (self.scope is None or self.scope(change))
                and (self.readable is None or self.readable(change)))

    @property
    def is_empty(self) -> bool:
        return (self.kind is None and self.object_id is None and self.action is None and self.scope is None
                and self.readable is None)


@dataclass(frozen=True, slots=True)
class Cursor:
    before: int | None
    limit: int


@dataclass(frozen=True, slots=True)
class Selection:
    changes: list[Change]        # newest first
    next_before: int | None      # cursor of the older page; None when nothing older matches


def parse_filter(args: Mapping[str, str], *, targets: bool) -> HistoryFilter:
    """``action`` everywhere; ``type`` and ``resourceId`` only where the URL does not fix them (``targets``)."""
    action = parse_actions(args.get("action"))
    if not targets:
        return HistoryFilter(action=action)
    object_id = args.get("resourceId")
    if object_id is not None and not object_id.strip():
        raise ProblemError("API012", detail="resourceId must not be empty.")
    return HistoryFilter(kind=_choice(args, "type", _KINDS), object_id=object_id, action=action)


def parse_actions(text: str | None) -> frozenset[Action]:
    """``action``: a comma-separated list of actions (``update,ref_changed``); absent: ``DEFAULT_ACTIONS``."""
    if text is None:
        return DEFAULT_ACTIONS
    names = text.split(",")
    if len(names) > MAX_ACTION_NAMES or any(name.strip() not in _ACTIONS for name in names):
        raise ProblemError("API012", detail=f"action must be a comma-separated list of {', '.join(_ACTIONS)}; "
                                            f"got {text[:64]!r}.")
    return frozenset(_ACTIONS[name.strip()] for name in names)


def _choice(args: Mapping[str, str], name: str, allowed: Mapping[str, Any]) -> Any:
    value = args.get(name)
    if value is None:
        return None
    if value not in allowed:
        raise ProblemError("API012", detail=f"{name} must be one of {', '.join(allowed)}; got {value[:64]!r}.")
    return allowed[value]


def parse_cursor(args: Mapping[str, str]) -> Cursor:
    text = args.get("before")
    before = None
    if text is not None:
        before = client_int(text)
        if before is None or before < 1:
            raise ProblemError("API012", detail="before must be a history id (a positive integer).")
        if before >= HUGE:
            before = None
    limit = client_int(args.get("limit"))
    return Cursor(before, min(limit, MAX_LIMIT) if limit else DEFAULT_LIMIT)


def check_feed_parameters(args: Mapping[str, str]) -> None:
    """Refuse (API012) a ``before`` or ``action`` a history feed would refuse: URLs documented with feed
    parameters check them on every representation (``app.blueprints.docs.feed_documented``), so a JSON
    answer never accepts what its feed refuses."""
    parse_cursor(args)
    parse_actions(args.get("action"))


def select(history: History, wanted: HistoryFilter, cursor: Cursor, budget: int = SCAN_BUDGET) -> Selection:
    found: list[Change] = []
    last_seen: Change | None = None
    for scanned, change in enumerate(history.newest_first(cursor.before)):
        if scanned >= budget:
            return Selection(found, last_seen.seq if last_seen is not None else cursor.before)
        last_seen = change
        if wanted.matches(change):
            if len(found) == cursor.limit:
                return Selection(found, found[-1].seq)
            found.append(change)
    return Selection(found, None)


def stack_scope(cache: Cache, name: str) -> Match:
    """A stack's own records and those of its members (services, configs, secrets, networks, volumes
    labelled with it, and the tasks of its services), judged from the record's objects, or from the cache
    for ``ref_changed`` records, which carry none."""

    def matches(change: Change) -> bool:
        if change.kind is ResourceKind.STACK:
            return change.id == name
        if change.kind not in _STACK_MEMBERS:
            return False
        raw = change.after or change.before
        if raw is None:
            entry = cache.get(change.kind, change.id)
            raw = entry.raw if entry is not None else None
        if raw is None:
            return False
        label = stack_label(change.kind, raw)
        if not label and change.kind is ResourceKind.TASK:   # a task without the label: its service's stack
            service = cache.get(ResourceKind.SERVICE, str(raw.get("ServiceID") or ""))
            label = stack_label(ResourceKind.SERVICE, service.raw) if service is not None else ""
        return label == name

    return matches


def stack_label(kind: ResourceKind, raw: Mapping[str, Any]) -> str:
    """The stack namespace label: Spec.Labels (swarm objects), Labels (networks, volumes), the container
    labels of a task (``docker stack deploy`` puts it there)."""
    if kind is ResourceKind.TASK:
        labels = dig(raw, "Spec", "ContainerSpec", "Labels")
    elif kind in (ResourceKind.NETWORK, ResourceKind.VOLUME):
        labels = raw.get("Labels")
    else:
        labels = dig(raw, "Spec", "Labels")
    value = labels.get(STACK_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else ""

