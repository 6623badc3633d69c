"""WSGI entry point for gunicorn (``gunicorn -c gunicorn.conf.py wsgi:app``); nothing starts here.

The cyclic garbage collector is off while the app is imported and built: the ~170,000 objects this makes
(modules, classes, functions, schemas) live as long as the process, yet ~260 automatic collections walked
them, ~85 ms of a ~500 ms import. They are then frozen (``gc.freeze``, as ``app.heap`` does after bulk
writes), so that no later collection walks them either; the few cycles the import left behind (~1,700
objects, no difference in RSS) stay with them.

The CEL filter module comes first, with the collector as usual: when the parser's tables are not cached
(``app.query.filter.cel_parser``) lark builds them, and in a gunicorn worker that build took 0.1 s at the
start of the import but 0.2 s at its end, 0.65 s with the collector off (the same work, on a larger heap).
"""

import gc
from typing import TYPE_CHECKING

import app.query.filter as _cel_filter  # noqa: F401  (first: see above)
from app import create_app

if TYPE_CHECKING:
    from flask import Flask


def _built() -> "Flask":
    enabled = gc.isenabled()
    gc.disable()
    try:
        return create_app()
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


app = _built()
