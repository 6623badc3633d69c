"""An exact object name wins over a format extension: ``/volumes/backup.json`` is volume
``backup.json`` when it exists, otherwise the JSON form of volume ``backup``.

The format shim strips the extension before routing (``app.http.formats``); this hook, after routing and
before the view, looks the unstripped name up on detail routes and, when the cache holds it, restores it
and drops the format, so negotiation falls back to ``Accept``. Sub-paths (``/services/x.json/tasks``)
end in their own segment and are not affected.
"""

from __future__ import annotations

from flask import Flask, request

from app.http.formats import FORMAT_KEY, SUFFIX_KEY
from app.resources import ResourceKind
from app.runtime import current_runtime


def _detail_rules() -> dict[str, ResourceKind]:
    return {f"{kind.spec.path}/<{kind.spec.id_placeholder}>": kind for kind in ResourceKind}


def init_exact_names(app: Flask) -> None:
    rules = _detail_rules()

    @app.before_request
    def _exact_name() -> None:
        suffix = request.environ.get(SUFFIX_KEY)
        rule = request.url_rule
        if not isinstance(suffix, str) or rule is None or request.view_args is None:
            return
        kind = rules.get(rule.rule)
        if kind is None:
            return
        placeholder = kind.spec.id_placeholder
        exact = str(request.view_args.get(placeholder, "")) + suffix
        if current_runtime().cache.get(kind, exact) is not None:
            request.view_args[placeholder] = exact
            request.environ.pop(FORMAT_KEY, None)
