"""gunicorn settings of the floors (``bench/floors.py``): the production server settings read from the
repository's ``gunicorn.conf.py`` (worker class, connections, keep-alive, log config), none of its hooks,
no access log."""

from __future__ import annotations

import runpy
from pathlib import Path

_production = runpy.run_path(str(Path(__file__).resolve().parent.parent / "gunicorn.conf.py"))

# the server's settings, by name (gunicorn reads this module's globals)
globals().update({name: _production[name] for name in
                  ("bind", "worker_class", "workers", "worker_connections", "timeout", "keepalive")})
# the floors write no access log (a bare app has none): what Shoal's costs is part of its figure
logconfig_dict = {**_production["logconfig_dict"]}
logconfig_dict["loggers"] = {**logconfig_dict["loggers"],
                             "gunicorn.access": {**logconfig_dict["loggers"]["gunicorn.access"], "level": "WARNING"}}
