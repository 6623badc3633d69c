"""Structured logging: one JSON (or text) formatter for the app and gunicorn, with the request id.

``dict_config`` is also handed to gunicorn as ``logconfig_dict``, so every line of the process has one
shape. Context travels through ``extra=``; those attributes become JSON members.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def dict_config(level: str = "info", fmt: str = "json") -> dict[str, Any]:
    formatter = ({"()": f"{__name__}.JsonFormatter"} if fmt == "json"
                 else {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"})
    python_level = {"warn": "WARNING"}.get(level, level.upper())
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "default",
                                "stream": "ext://sys.stderr"}},
        "root": {"level": python_level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": python_level, "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["stderr"], "propagate": False},
            "docker": {"level": "WARNING"}, "urllib3": {"level": "WARNING"},
        },
    }
