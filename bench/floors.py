"""The two floors the small-read figures are measured against (started by ``bench/bench_small_reads.py``
under the same gunicorn gevent worker as Shoal): a bare WSGI callable and a one-route Flask app, both
answering a pre-encoded JSON body of the size of a service detail.

    gunicorn -c bench/gunicorn_floor.py bench.floors:bare
    gunicorn -c bench/gunicorn_floor.py bench.floors:one_route
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response

BODY = os.environ.get("BENCH_FLOOR_BODY", "{}").encode()
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def bare(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", list(_HEADERS))
    return [BODY]


one_route = Flask(__name__)


@one_route.get("/<path:anything>")
@one_route.get("/")
def _answer(anything: str = "") -> Response:
    return Response(BODY, mimetype="application/json")
