"""Other URLs' JSON answers inside a page (the overview's panels, a detail's history), as the caller.

Only the view runs, in a request context of its own that shares the page's application context (the
caller's ``g.identity`` and access): the same answer, ACL and problems an API client of the same caller
gets from that URL. A problem comes back as ``None`` plus the problem body, so a panel the caller may not
read shows why instead of breaking the page.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from flask import Response, current_app

from app.errors import ProblemError
from app.http.paths import is_resource
from app.http.problems import PROBLEM_TYPE
from app.runtime import current_runtime


def rest(path: str, **query: object) -> dict[str, Any]:
    """``{"doc": body or None, "problem": problem or None, "status": int}`` of ``GET path?query``."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    args = {k: str(v) for k, v in query.items() if v is not None}
    url = path + ("?" + urlencode(args) if args else "")
    with app.test_request_context(url, headers={"Accept": "application/json"}):
        try:
            if is_resource(path) and not current_runtime().cache.freshness.synced:   # the API client's gate
                raise ProblemError("ENG001", detail="The first engine sync has not completed yet.")
            response: Response = app.make_response(app.dispatch_request())
        except Exception as error:   # a view's problem or HTTP error becomes the panel's
            response = app.make_response(app.handle_user_exception(error))
    data = response.get_data()
    if response.mimetype == PROBLEM_TYPE:
        return {"doc": None, "problem": json.loads(data), "status": response.status_code}
    if response.mimetype and "json" in response.mimetype:
        return {"doc": json.loads(data), "problem": None, "status": response.status_code}
    return {"doc": None, "problem": None, "status": response.status_code}
