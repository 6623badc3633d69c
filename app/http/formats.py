"""WSGI shim: a ``.json``/``.html``/``.atom``/``.feed.json`` suffix on the path selects the format before routing
(and ``.jgf``/``.graphml``/``.dot`` on ``/topology``).

The suffix is stripped from PATH_INFO so routes are declared once, and recorded in the environ, where
negotiation gives it precedence over the Accept header. Volume and stack names may themselves end in
``.json`` (``/volumes/backup.json``): the suffix is kept too, and ``app.http.exact_names`` puts it back
when an object of that exact name exists, so a resource is always reachable at its own ``@id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMAT_KEY = "shoal.format"
SUFFIX_KEY = "shoal.format_suffix"
EXTENSIONS = {".feed.json": "feed.json", ".json": "json", ".html": "html", ".atom": "atom"}  # longest first
# Graph formats, only where a graph is served (``app.http.graph_formats``): elsewhere the path is left alone.
GRAPH_EXTENSIONS = {".graphml": "graphml", ".jgf": "jgf", ".dot": "dot"}
GRAPH_PATHS = frozenset({"/topology"})

WSGIApp = Any


class FormatExtensions:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        candidates = EXTENSIONS | GRAPH_EXTENSIONS if path.rsplit(".", 1)[0] in GRAPH_PATHS else EXTENSIONS
        for suffix, name in candidates.items():
            if path.endswith(suffix) and len(path) > len(suffix) + 1:
                environ["PATH_INFO"] = path[: -len(suffix)]
                environ[FORMAT_KEY] = name
                environ[SUFFIX_KEY] = suffix
                break
        result: Iterable[bytes] = self.app(environ, start_response)
        return result


def requested_format(environ: dict[str, Any]) -> str | None:
    value = environ.get(FORMAT_KEY)
    return value if isinstance(value, str) else None
