"""/search: one query across every kind, grouped by kind with full counts, ranked, a few results per kind.

Why it is built this way
    A search runs inside the one gevent worker, so its cost must stay far below a millisecond per thousand
    cached objects. Each entry carries ``search_text`` (derived once when the cache stores it,
    ``app.cache.entries.search_text``); per kind the texts are listed in name order, the *corpus*, made
    again only after the kind changed (``cache.entries`` hands out a new list then). Finding the matching
    entries is one pass of ``map(contains, ...)`` in C (no Python step per entry); ranking looks only at
    matches, and only until the best ``limit`` of a kind are known. (A loop of ``str.find`` over one joined
    string was 2x faster for rare queries but 6x slower for a query that matches nearly everything.)

Ranking (best first), from the delimiters the texts carry:
    ``exact``  the name, or another field (id, image, a label ``key=value`` or value), equals the query
    ``prefix`` the name or another field starts with it (an id prefix lands here)
    ``substring`` any field contains it
    ``segment`` the name matches by segment prefixes (``wa`` → ``web_api``, the list ``search`` rule)
    Within a rank, a name match comes first, then objects in name order (tasks: in cache order).
    Tasks match on their own id, image and container labels, and on their service's name
    (docs/search-and-recommendations.md), with the rank of that name match.

ACL (docs/search-and-recommendations.md): with a read predicate (``keep``; None when unrestricted) the
matches are narrowed to readable objects before they are counted or ranked, so ``counts`` are the full
counts minus hidden hits; a task found through its service's name belongs to a readable service, hence is
readable itself. The narrowing runs in yielding slices (``app.query.listing.select_yielding``).

Bounds: ``q`` at most 200 characters (``SEA002``); the segment rule runs on RE2 (linear time) over the
names only; ``limit`` caps each kind's results at 1000.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from itertools import accumulate, chain, compress, count, repeat
from operator import contains
from typing import Any

import re2

from app.cache.entries import FIELD_MARK, NAME_MARK, Entry, image_reference
from app.cache.store import Cache
from app.errors import ProblemError
from app.query.listing import select_yielding
from app.query.representations import task_name
from app.resources import ResourceKind

MAX_QUERY = 200
DEFAULT_LIMIT = 3
MAX_LIMIT = 1000
# The order kinds appear in (docs/search-and-recommendations.md).
KIND_ORDER = (ResourceKind.SERVICE, ResourceKind.STACK, ResourceKind.NODE, ResourceKind.TASK,
              ResourceKind.CONFIG, ResourceKind.SECRET, ResourceKind.NETWORK, ResourceKind.VOLUME)
_NAME_SORT = {ResourceKind.NODE: "hostname"}
_SEPARATORS = frozenset("-_.")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 1 << 20   # a 200-character query compiles to a few thousand instructions


class Rank(IntEnum):
    EXACT_NAME = 0
    EXACT = 1
    PREFIX_NAME = 2
    PREFIX = 3
    SUBSTRING = 4
    SEGMENT = 5

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {Rank.EXACT_NAME: "exact", Rank.EXACT: "exact", Rank.PREFIX_NAME: "prefix", Rank.PREFIX: "prefix",
           Rank.SUBSTRING: "substring", Rank.SEGMENT: "segment"}


@dataclass(frozen=True, slots=True)
class SearchQuery:
    text: str      # lower-cased, trimmed, control characters removed
    limit: int     # results kept per kind
    original: str = ""   # as given (trimmed): echoed in the result


Keep = Callable[[Entry], bool] | None


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    rank: Rank


@dataclass(frozen=True, slots=True)
class KindResult:
    kind: ResourceKind
    count: int            # every matching object of the kind
    hits: list[Hit]       # the best ``limit`` of them, best first


def parse_search_query(args: Mapping[str, str]) -> SearchQuery:
    """``q`` required (blank ``SEA001``, over 200 characters ``SEA002``); ``limit`` 0 or
    over 1000 → 1000, negative or not an integer → 3."""
    raw = args.get("q")
    text = "".join(char for char in (raw or "") if char >= " " and char != "\x7f").strip()
    if not text:
        raise ProblemError("SEA001", detail="Pass the text to search for in q, e.g. /search?q=web.")
    if len(text) > MAX_QUERY:
        raise ProblemError("SEA002", detail=f"q has {len(text)} characters; at most {MAX_QUERY} are allowed.")
    return SearchQuery(text.lower(), _limit(args.get("limit")), text)


def _limit(value: str | None) -> int:
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        return MAX_LIMIT if text.isascii() and text.isdigit() else DEFAULT_LIMIT
    number = int(text)
    return MAX_LIMIT if number == 0 or number > MAX_LIMIT else number


@dataclass(frozen=True, slots=True)
class _Corpus:
    source: list[Entry]     # the cache's list this was made from: still valid while the cache hands it out
    ids: list[str]
    texts: list[str]        # the entries' search texts
    names: bytes            # lower-cased names, one per line, UTF-8 (RE2 maps str offsets at O(n) per call)
    name_ends: list[int]


def _build_corpus(source: list[Entry]) -> _Corpus:
    texts = [entry.search_text for entry in source]
    names = [(entry.search_name + "\n").encode() for entry in source]
    return _Corpus(source, [entry.id for entry in source], texts, b"".join(names),
                   list(accumulate(map(len, names))))


# Below this many matches, each match is ranked by looking at its own text; above, by one more pass over
# the corpus per rank still needed (a pass costs about as much as ranking a thousand matches one by one).
_RANK_EACH_BELOW = 1024


class _Matches:
    """The matches of one kind: every entry containing the query, the segment-rule extras, and the
    entries of each rank, computed only when the selection of the best results gets to that rank."""

    def __init__(self, corpus: _Corpus, query: str, segment: Any, keep: Keep = None) -> None:
        self.corpus, self.query = corpus, query
        self.hits = _occurrences(corpus, query)
        self.extra: list[int] = []
        if segment is not None:
            found = set(self.hits)
            self.extra = [i for i in _segment_hits(corpus, segment) if i not in found]
        self._allowed: set[int] | None = None
        if keep is not None:
            source = corpus.source
            self.hits = select_yielding(self.hits, lambda index: keep(source[index]))
            self.extra = [index for index in self.extra if keep(source[index])]
            self._allowed = set(self.hits)
        self._by_rank: dict[Rank, list[int]] | None = None

    @property
    def count(self) -> int:
        return len(self.hits) + len(self.extra)

    def of_rank(self, rank: Rank) -> list[int]:
        """Indices (ascending: name order) of the entries whose best rank may be ``rank``; an entry may
        also appear under a worse rank (callers skip what they took)."""
        if rank is Rank.SUBSTRING:
            return self.hits
        if rank is Rank.SEGMENT:
            return self.extra
        needles = _needles(self.query)
        if len(self.hits) < _RANK_EACH_BELOW:
            if self._by_rank is None:
                self._by_rank = {r: [] for r in Rank}
                for index in self.hits:
                    self._by_rank[_rank_of(self.corpus, index, needles)].append(index)
            return self._by_rank[rank]
        found = _occurrences(self.corpus, dict(needles)[rank])
        allowed = self._allowed
        return found if allowed is None else [index for index in found if index in allowed]


def _needles(query: str) -> tuple[tuple[Rank, str], ...]:
    """What an entry's text contains when it matches at each rank better than substring."""
    return ((Rank.EXACT_NAME, NAME_MARK + query + FIELD_MARK), (Rank.EXACT, FIELD_MARK + query + FIELD_MARK),
            (Rank.PREFIX_NAME, NAME_MARK + query), (Rank.PREFIX, FIELD_MARK + query))


def _rank_of(corpus: _Corpus, index: int, needles: tuple[tuple[Rank, str], ...]) -> Rank:
    text = corpus.texts[index]
    for rank, needle in needles:
        if needle in text:
            return rank
    return Rank.SUBSTRING


def _occurrences(corpus: _Corpus, needle: str) -> list[int]:
    """Indices (ascending) of the entries whose text contains ``needle``, without a Python step per entry
    (``map`` and ``compress`` run in C: about 45-90 ns per entry at 10,000 tasks, whatever matches)."""
    return list(compress(count(), map(contains, corpus.texts, repeat(needle))))


class SearchIndex:
    """Per-kind corpora over one cache, remade lazily when a kind changed; owned by the Runtime."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._corpora: dict[ResourceKind, _Corpus] = {}

    def _corpus(self, kind: ResourceKind) -> _Corpus:
        # Name order for every kind but tasks, whose display name needs their service (cache order there).
        source = (self._cache.entries(kind) if kind is ResourceKind.TASK
                  else self._cache.sorted_entries(kind, _NAME_SORT.get(kind, "name")))
        corpus = self._corpora.get(kind)
        if corpus is None or corpus.source is not source:
            corpus = self._corpora[kind] = _build_corpus(source)
        return corpus

    def search(self, query: SearchQuery, keep: Keep = None) -> list[KindResult]:
        """Every kind with at least one (readable) match, in the documented order (``KINDS``)."""
        segment = _segment_program(query.text)
        results: list[KindResult] = []
        service_names: dict[str, Rank] = {}
        for kind in KIND_ORDER:
            if kind is ResourceKind.TASK:
                result = self._tasks(query, service_names, keep)
            else:
                matches = _Matches(self._corpus(kind), query.text, segment, keep)
                if kind is ResourceKind.SERVICE:
                    service_names = _name_ranks(matches)
                result = KindResult(kind, matches.count, _best(matches, query.limit))
            if result.count:
                results.append(result)
        return results

    def _tasks(self, query: SearchQuery, service_names: dict[str, Rank], keep: Keep = None) -> KindResult:
        """Own-field matches and the tasks of services whose name matched, at that name's rank."""
        corpus = self._corpus(ResourceKind.TASK)
        matches = _Matches(corpus, query.text, None, keep)
        of_service = self._cache.task_ids_of_service
        by_name = set().union(*map(of_service, service_names))
        count = len(by_name.union(map(corpus.ids.__getitem__, matches.hits))) if by_name else len(matches.hits)
        hits: list[Hit] = []
        taken: set[str] = set()
        for rank in Rank:
            if len(hits) >= query.limit:
                break
            own = map(corpus.ids.__getitem__, matches.of_rank(rank)) if rank >= Rank.EXACT else iter(())
            inherited = (task_id for service_id, name_rank in service_names.items() if name_rank is rank
                         for task_id in sorted(of_service(service_id)))
            for task_id in chain(own, inherited):   # lazily: stops at the limit
                entry = self._cache.get(ResourceKind.TASK, task_id)
                if entry is not None and task_id not in taken:
                    taken.add(task_id)
                    hits.append(Hit(entry, rank))
                    if len(hits) >= query.limit:
                        break
        return KindResult(ResourceKind.TASK, count, hits)


def _best(matches: _Matches, limit: int) -> list[Hit]:
    """The ``limit`` best: by rank, then in corpus (name) order."""
    hits: list[Hit] = []
    taken: set[int] = set()
    source = matches.corpus.source
    for rank in Rank:
        if len(hits) >= limit:
            break
        for index in matches.of_rank(rank):
            if index not in taken:
                taken.add(index)
                hits.append(Hit(source[index], rank))
                if len(hits) >= limit:
                    break
    return hits


def _name_ranks(matches: _Matches) -> dict[str, Rank]:
    """Service id → how its *name* matched, in name order (its tasks inherit that rank); services matched
    only through other fields are left out."""
    names: dict[str, Rank] = {}
    query, source = matches.query, matches.corpus.source
    for index in sorted((*matches.hits, *matches.extra)):
        entry = source[index]
        name = entry.search_name
        if name == query:
            names[entry.id] = Rank.EXACT_NAME
        elif name.startswith(query):
            names[entry.id] = Rank.PREFIX_NAME
        elif query in name:
            names[entry.id] = Rank.SUBSTRING
        elif entry.search_segments and index in matches.extra:
            names[entry.id] = Rank.SEGMENT
    return names


def _segment_program(query: str) -> Any:
    """RE2 for the segment rule over the names corpus (one name per line): the query split into
    consecutive non-empty prefixes of consecutive segments, starting at any segment. None when the rule
    cannot add anything: one character (a substring already), or a separator in the query (segments have
    none)."""
    if len(query) < 2 or _SEPARATORS.intersection(query):
        return None
    gap = r"(?:[^\n\-_.]*[\-_.]+)?"
    pattern = r"(?m)^(?:[^\n]*[\-_.])?" + gap.join(re2.escape(char) for char in query)
    try:   # not re2.compile: its own cache is unbounded in bytes
        return re2._Regexp(pattern.encode(), _RE2_OPTIONS)
    except (re2.error, ValueError, TypeError):   # over the program budget: search without the segment rule
        return None


def _segment_hits(corpus: _Corpus, program: Any) -> list[int]:
    ends = corpus.name_ends
    # The pattern is anchored at a line start, so it matches at most once per name.
    return [bisect_right(ends, match.start()) for match in program.finditer(corpus.names)]


# ---------------------------------------------------------------------------------------------- results
def _service_state(cache: Cache, entry: Entry) -> str:
    """Running (every desired replica runs), updating (a rolling update is under way),
    failed (nothing runs and the latest task failed), else pending."""
    raw = entry.raw
    update = raw.get("UpdateStatus")
    if isinstance(update, dict) and update.get("State") in ("updating", "rollback_started"):
        return "updating"
    running = cache.running_tasks(entry.id)
    replicated = (raw.get("Spec") or {}).get("Mode", {}).get("Replicated")
    desired = replicated.get("Replicas", 1) if isinstance(replicated, dict) else None
    if (desired is None and running) or (desired is not None and running >= desired):
        return "running"
    if running == 0:
        latest = max(cache.tasks_of_service(entry.id), key=lambda task: task.updated, default=None)
        if latest is not None and latest.activation["state"] in ("failed", "rejected"):
            return "failed"
    return "pending"


def _detail(cache: Cache, entry: Entry) -> str:
    kind = entry.kind
    if kind in (ResourceKind.SERVICE, ResourceKind.TASK):
        return image_reference(str(entry.activation["image"]))
    if kind is ResourceKind.STACK:
        count = entry.activation["services"]
        return f"{count} service" + ("" if count == 1 else "s")
    if kind is ResourceKind.NODE:
        return f"{entry.activation['role']}, {entry.activation['state']}"
    if kind in (ResourceKind.CONFIG, ResourceKind.SECRET):
        created = entry.raw.get("CreatedAt")
        return created if isinstance(created, str) else ""
    return str(entry.activation["driver"])


def result_item(cache: Cache, hit: Hit, base: str, keep: Keep = None) -> dict[str, Any]:
    """One result (docs/search-and-recommendations.md): ``@id``, ``id``, ``name``, ``detail``, ``state``
    (services, tasks), plus ``match`` (exact, prefix, substring or segment)."""
    entry = hit.entry
    item: dict[str, Any] = {"@id": f"{base}{entry.kind.spec.path}/{entry.id}", "id": entry.id,
                            "name": task_name(cache, entry, keep) if entry.kind is ResourceKind.TASK else entry.name,
                            "detail": _detail(cache, entry)}
    if entry.kind is ResourceKind.SERVICE:
        item["state"] = _service_state(cache, entry)
    elif entry.kind is ResourceKind.TASK:
        item["state"] = entry.activation["state"]
    item["match"] = hit.rank.label
    return item


def result_members(cache: Cache, query: SearchQuery, results: list[KindResult], base: str,
                   keep: Keep = None) -> dict[str, Any]:
    """The members of the SearchResult body after its JSON-LD envelope."""
    return {
        "query": query.original or query.text, "limit": query.limit,
        "results": {r.kind.spec.plural: [result_item(cache, hit, base, keep) for hit in r.hits] for r in results},
        "counts": {r.kind.spec.plural: r.count for r in results},
        "total": sum(r.count for r in results),
    }
