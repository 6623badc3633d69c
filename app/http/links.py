"""RFC 8288 Link headers: discovery links on every response, the Atom alternate, paging relations."""

from __future__ import annotations

from collections.abc import Iterable


def link(target: str, rel: str, media_type: str | None = None) -> str:
    value = f'<{target}>; rel="{rel}"'
    if media_type:
        value += f'; type="{media_type}"'
    return value


def discovery_links(base_path: str) -> list[str]:
    return [link(f"{base_path}/api", "service-desc", "application/openapi+json"),
            link(f"{base_path}/api/context.jsonld", "describedby", "application/ld+json")]


def join(values: Iterable[str]) -> str:
    return ", ".join(values)
