"""WSGI entry point for gunicorn (``gunicorn -c gunicorn.conf.py wsgi:app``); nothing starts here.

The cyclic garbage collector is off while the app is imported and built: the ~170,000 objects this makes
(modules, classes, functions, schemas) live as long as the process, yet ~260 automatic collections walked
them, ~85 ms of a ~500 ms import. They are then frozen (``gc.freeze``, as ``app.heap`` does after bulk
writes), so that no later collection walks them either; the few cycles the import left behind (~1,700
objects, no difference in RSS) stay with them.
"""

import gc
from typing import TYPE_CHECKING

from app import create_app  # cheap: the factory and everything it needs are imported by create_app()

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
