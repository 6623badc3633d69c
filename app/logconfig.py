"""Structured logging: one JSON (or text) formatter for the app and gunicorn, with the request id.

``dict_config`` is also handed to gunicorn as ``logconfig_dict``, so every line of the process has one
shape. Context travels through ``extra=``; those attributes become JSON members.
"""

from __future__ import annotations

import json
import logging
import re
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


class RedactCredentials(logging.Filter):
    """Replaces the values of OAuth query parameters (``/auth/callback?code=…&state=…``) in log lines: the
    access log (gunicorn's ``%(r)s``) prints request lines with their query string. Installed on the access
    log in every mode: a credential in a URL is a credential whatever the configured mode."""

    PARAMETER = re.compile(r"([?&](?:code|state|session_state|id_token|access_token|refresh_token|token)=)"
                           r"[^&\s\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.PARAMETER.sub(r"\1[redacted]", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def dict_config(level: str = "info", fmt: str = "json") -> dict[str, Any]:
    formatter = ({"()": f"{__name__}.JsonFormatter"} if fmt == "json"
                 else {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"})
    python_level = {"warn": "WARNING"}.get(level, level.upper())
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {"credentials": {"()": f"{__name__}.RedactCredentials"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "default",
                                "stream": "ext://sys.stderr"}},
        "root": {"level": python_level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": python_level, "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["stderr"], "propagate": False,
                                "filters": ["credentials"]},
            "docker": {"level": "WARNING"}, "urllib3": {"level": "WARNING"},
        },
    }
