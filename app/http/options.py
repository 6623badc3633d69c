"""``OPTIONS`` on every routed URL: what this caller may do there, and nothing to anyone else.

Flask answers OPTIONS itself on every rule (its automatic OPTIONS: an empty 200). Two things make that
answer honest:

- the authentication hook (``app.http.auth``) runs for OPTIONS as for any other method, so outside the
  bypassed paths (``/-/…``, ``/api…``, ``/auth/…``, ``/assets/…``) a caller without credentials gets 401
  ``AUT001``, not a list of methods;
- ``app.http.allow.add_allow`` replaces Flask's ``Allow`` (every routed method, writes included) with the
  caller's: the same list a GET of the URL carries (the operations level, then the ACL write check),
  and ``Accept-Patch`` where PATCH is allowed (RFC 5789 §3.1 asks for it on OPTIONS).

A CORS preflight from an origin of ``server.cors.origins`` never gets here: ``app.http.cors`` answers it
before authentication (it carries no credentials); from other origins it is this ordinary OPTIONS. The
OpenAPI document describes OPTIONS on every path (:func:`document_options`).
"""

from __future__ import annotations

import copy
from typing import Any

from app.http.auth import BYPASS_PREFIXES

_OPTIONS: dict[str, Any] = {
    "summary": "The methods this caller may use on the URL",
    "description": "Authenticated like any other method; Allow lists what a GET of the URL lists (the "
                   "operations level and the caller's ACL write permission), Accept-Patch where PATCH is allowed.",
    "responses": {
        "200": {"description": "No body; the headers say what is allowed.",
                "headers": {"Allow": {"schema": {"type": "string"}, "description": "e.g. GET, HEAD, PUT"},
                            "Accept-Patch": {"schema": {"type": "string"},
                                             "description": "Only where PATCH is allowed for this caller."}}},
    },
}


def document_options(document: dict[str, Any], unauthenticated: dict[str, Any], problem: dict[str, Any]) -> None:
    """Add an ``options`` operation to every path (``unauthenticated``: the 401 response of paths behind
    authentication; ``problem``: the default error response)."""
    for path, operations in document.get("paths", {}).items():
        if "options" in operations:
            continue
        operation = copy.deepcopy(_OPTIONS)
        if not path.startswith(BYPASS_PREFIXES):
            operation["responses"]["401"] = copy.deepcopy(unauthenticated)
        operation["responses"]["default"] = copy.deepcopy(problem)
        operations["options"] = operation
