"""What every page template may use: the caller, the cache's freshness, the navigation, the write checks.

``may(name)`` asks the same question that gates the write and builds ``Allow``
(``app.http.allow.write_refusal``: operations level, then the ACL on the URL's target), so a page shows a
control exactly when the API would accept its request; nothing here guesses from a role or a level.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from flask import Flask, g, request
from markupsafe import Markup

from app.dashboard.reads import rest
from app.http.allow import write_refusal
from app.runtime import current_runtime
from app.writes.operations import OPERATIONS

# The navigation: (label, path), in the order an operator scans a cluster.
NAV: tuple[tuple[str, str], ...] = (
    ("Overview", "/"), ("Nodes", "/nodes"), ("Services", "/services"), ("Tasks", "/tasks"),
    ("Stacks", "/stacks"), ("Configs", "/configs"), ("Secrets", "/secrets"), ("Networks", "/networks"),
    ("Volumes", "/volumes"), ("Topology", "/topology"), ("History", "/history"),
    ("Recommendations", "/recommendations"), ("Metrics", "/cluster/metrics"), ("Swarm", "/swarm"),
    ("Plugins", "/plugins"), ("API", "/api"),
)


def may(name: str, view_args: dict[str, str] | None = None) -> bool:
    """Whether the caller may run the write operation ``name`` (``app.writes.operations``) on the object
    of this page's URL (or of ``view_args``)."""
    op = OPERATIONS.get(name)
    if op is None:
        return False
    return write_refusal(op, view_args if view_args is not None else request.view_args) is None


def freshness() -> dict[str, Any]:
    fresh = current_runtime().cache.freshness
    contact = (datetime.fromtimestamp(fresh.last_contact, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
               if fresh.last_contact is not None else None)
    state = "live" if fresh.connected and fresh.synced else ("syncing" if not fresh.synced else "stale")
    return {"state": state, "lastContact": contact, "seq": fresh.seq}


_FRACTION = re.compile(r"\.\d+")   # the engine's nanoseconds: Python 3.11 parses at most microseconds


def _ago(value: object) -> str:
    """'3 min ago' for an engine or ISO timestamp (the exact time goes in a title or <time> attribute)."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        when = datetime.fromisoformat(_FRACTION.sub(lambda m: m.group(0)[:7], value.replace("Z", "+00:00")))
    except ValueError:
        return value
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = int((datetime.now(UTC) - when).total_seconds())
    if seconds < 0:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def _bytes(value: object) -> str:
    if not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


def _short(value: object, length: int = 12) -> str:
    return str(value)[:length] if value is not None else ""


def _pretty(value: object) -> Markup:
    """A JSON value as indented text (escaped), for <pre> blocks of specs and raw documents."""
    from markupsafe import escape
    return escape(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str))


def _b64text(value: object) -> str | None:
    """A config's base64 data as text when it is UTF-8 text (else None: show it as binary)."""
    import base64
    import binascii
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _context() -> dict[str, Any]:
    settings = current_runtime().settings
    return {"base": settings.base_path, "nav": NAV, "identity": g.get("identity"), "may": may,
            "freshness": freshness, "operations_level": settings.operations_level, "rest": rest}


def init_context(app: Flask) -> None:
    app.context_processor(_context)
    # Also globals: a macro file imported without context (``{% import "macros/actions.html" as act %}``)
    # sees only the environment's globals, and its controls must still ask ``may``.
    with app.app_context():
        base = current_runtime().settings.base_path
    app.jinja_env.globals.update(may=may, rest=rest, freshness=freshness, base=base)
    app.jinja_env.filters.update(ago=_ago, bytes=_bytes, short=_short, pretty=_pretty, b64text=_b64text)
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
