"""Structured logging: one JSON (or text) formatter for the app and gunicorn, with the request id.

``dict_config`` is also handed to gunicorn as ``logconfig_dict``, so every line of the process has one
shape. Context travels through ``extra=``; those attributes become JSON members.
"""

from __future__ import annotations

import json
import logging
import re
import time
import traceback
from typing import Any

from gunicorn import glogging

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    _second: tuple[int, str] = (-1, "")   # the timestamp text up to the second, made once per second

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if self._second[0] != second:
            self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        line: dict[str, Any] = {
            "ts": f"{self._second[1]}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        attributes = vars(record)
        for key in attributes.keys() - _STANDARD:   # the extra= members (a set difference, not a loop)
            line[key] = attributes[key]
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class AccessLogger(glogging.Logger):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's logger, whose access line in gunicorn's default format is written directly: gunicorn built a
    dict of every request header, response header and environ variable per request (a third of the access
    log's cost) for the nine it prints. The line is the same (quotes in values escaped as gunicorn does);
    another ``access_log_format`` goes through gunicorn."""

    DEFAULT_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
    _now: tuple[int, str] = (-1, "")

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        if self.cfg.access_log_format != self.DEFAULT_FORMAT:
            super().access(resp, req, environ, request_time)
            return
        if not self.access_log_enabled or not self.access_log.isEnabledFor(logging.INFO):
            return
        second = int(time.time())
        if self._now[0] != second:
            self._now = (second, time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second)))
        status = resp.status
        sent = getattr(resp, "sent", None)
        fields = (environ.get("REMOTE_ADDR", "-"), self._get_user(environ) or "-",
                  f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}",
                  status.split(None, 1)[0] if isinstance(status, str) else str(status),
                  str(sent) if sent is not None else "-",
                  environ.get("HTTP_REFERER", "-"), environ.get("HTTP_USER_AGENT", "-"))
        h, u, r, code, size, f, a = (value.replace('"', '\\"') for value in fields)
        try:
            self.access_log.info(f'{h} - {u} {self._now[1]} "{r}" {code} {size} "{f}" "{a}"')
        except Exception:
            self.error(traceback.format_exc())


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
