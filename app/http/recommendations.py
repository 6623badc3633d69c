"""/recommendations over HTTP: the findings as a JSON-LD collection (filters, paging, severity summary)
and as a feed (Atom, JSON Feed) with one entry per finding.

Filters (docs/search-and-recommendations.md): ``severity``, ``kind`` (resource type) and ``check``
are comma lists, ``resource`` an exact resource id or name; an unknown severity, kind or check is a 400
``API012``. ``limit`` (default 200, at most 1000) and ``offset`` bound the work per request. With
``server.recommendations = false`` the engine does not run and the path is a 404.

ACL (docs/acl.md): only findings the caller may read are listed, counted and summarised (keys
``service:<targetName>`` with its stack, ``node:<targetName>``, else ``swarm:cluster``); with a policy the
caller needs at least one grant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from flask import Response, request
from werkzeug.exceptions import NotFound

from app.errors import ProblemError
from app.http import respond
from app.http.acl_read import finding_filter, require_grants
from app.http.feeds import FeedItem, FeedPage, feed_query, feed_response, page_url
from app.http.jsonld import envelope
from app.http.negotiation import current_representation
from app.http.search import require_synced
from app.query.paging import client_int
from app.recommendations.checks import CHECK_IDS
from app.recommendations.findings import RESOURCE_TYPES, SEVERITIES, Finding, iso
from app.recommendations.prometheus_checks import PROMETHEUS_CHECK_IDS
from app.runtime import current_runtime

DEFAULT_LIMIT, MAX_LIMIT = 200, 1000
FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT = 50, 200
_EXTENSIONS = {"atom": ".atom", "jsonfeed": ".feed.json"}


@dataclass(frozen=True, slots=True)
class FindingFilter:
    severities: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    checks: frozenset[str] | None = None
    resource: str | None = None

    def matches(self, finding: Finding) -> bool:
        return ((self.severities is None or finding.severity in self.severities)
                and (self.kinds is None or finding.resource_type in self.kinds)
                and (self.checks is None or finding.check in self.checks)
                and (self.resource is None or self.resource in (finding.resource_id, finding.resource_name)))


def _choices(args: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> frozenset[str] | None:
    text = args.get(name)
    if text is None or not text.strip():
        return None
    values = frozenset(value.strip().lower() for value in text.split(",") if value.strip())
    unknown = sorted(values - set(allowed))
    if unknown:
        raise ProblemError("API012", detail=f"Unknown {name} {', '.join(unknown)}; use {', '.join(allowed)}.")
    return values


def parse_filter(args: Mapping[str, str]) -> FindingFilter:
    resource = (args.get("resource") or "").strip()
    return FindingFilter(_choices(args, "severity", SEVERITIES), _choices(args, "kind", RESOURCE_TYPES),
                         _choices(args, "check", (*CHECK_IDS, *PROMETHEUS_CHECK_IDS)), resource or None)


def _engine_findings() -> list[Finding]:
    runtime = current_runtime()
    if not runtime.settings.recommendations:
        raise NotFound("Recommendations are turned off (server.recommendations = false).")
    require_synced()
    require_grants()
    findings = runtime.recommendations.findings()
    readable = finding_filter()
    return findings if readable is None else [finding for finding in findings if readable(finding)]


def collection() -> Response:
    wanted = parse_filter(request.args)
    findings = [finding for finding in _engine_findings() if wanted.matches(finding)]
    limit = client_int(request.args.get("limit"))
    limit = min(limit, MAX_LIMIT) if limit else DEFAULT_LIMIT
    offset = client_int(request.args.get("offset")) or 0
    base = respond.base_path()
    severities = Counter(finding.severity for finding in findings)
    computed_at = current_runtime().recommendations.computed_at
    body = envelope(base, "/recommendations", "RecommendationCollection")
    body.update(items=[finding.to_json(base) for finding in findings[offset:offset + limit]],
                total=len(findings), limit=limit, offset=offset,
                summary={severity: severities.get(severity, 0) for severity in SEVERITIES},
                computedAt=iso(computed_at) if computed_at is not None else None)
    return respond.with_freshness(respond.document(body))


def feed(*_view: object) -> Response:
    """Newest findings first (by appearance); ``before`` = a finding's ``seq``; ids stable per finding
    (``urn:service:recommendation:<targetId>:<category>:<resource>``)."""
    wanted = parse_filter(request.args)
    before = client_int(request.args.get("before")) if request.args.get("before") is not None else None
    if request.args.get("before") is not None and (before is None or before < 1):
        raise ProblemError("API012", detail="before must be a finding's seq (a positive integer).")
    limit = client_int(request.args.get("limit"))
    limit = min(limit, FEED_MAX_LIMIT) if limit else FEED_DEFAULT_LIMIT
    findings = sorted((f for f in _engine_findings() if wanted.matches(f) and (before is None or f.seq < before)),
                      key=lambda finding: finding.seq, reverse=True)
    page, older = findings[:limit], len(findings) > limit
    runtime, base = current_runtime(), respond.base_path()
    feed_path = base + request.path + _EXTENSIONS[current_representation().media]
    return respond.with_freshness(feed_response(FeedPage(
        feed_id="urn:service:feed:/recommendations" + feed_query(request.args),
        title="Shoal: recommendations", description="Findings of the checks over the cluster, newest first.",
        self_url=page_url(feed_path, request.args), first_url=page_url(feed_path, request.args, before=None),
        alternate=base + "/recommendations", items=[_item(finding, base) for finding in page],
        updated=runtime.recommendations.computed_at or runtime.started_at,
        next_url=page_url(feed_path, request.args, before=str(page[-1].seq)) if older else None)))


def _item(finding: Finding, base: str) -> FeedItem:
    target = finding.resource_name or finding.resource_id
    return FeedItem(
        id=f"urn:service:recommendation:{finding.resource_id}:{finding.check}:{finding.resource or ''}",
        title=f"{finding.severity}: {finding.check} on {finding.resource_type} {target}",
        updated=finding.first_seen, link=base + "/recommendations?check=" + finding.check,
        related=finding.link(base), summary=finding.message,
        content=f"{finding.message}\nSuggested fix: {finding.fix}",
        categories=(finding.severity, finding.check, finding.resource_type), data=finding.to_json(base))
