"""The access logger (app.logconfig.AccessLogger) writes gunicorn's own line, made directly."""

from __future__ import annotations

import base64
import datetime
import logging
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from app.logconfig import AccessLogger


class _Response:
    def __init__(self, status: Any, sent: int | None) -> None:
        self.status, self.sent, self.headers = status, sent, [("Content-Type", "application/json")]


class _Request:
    headers = [("HOST", "127.0.0.1")]


def _line(logger_class: type[Logger], environ: dict[str, Any], response: _Response,
          caplog: pytest.LogCaptureFixture) -> str:
    config = Config()
    config.set("accesslog", "-")
    logger = logger_class(config)
    logger.access_log.propagate = True
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gunicorn.access"):
        logger.access(response, _Request(), environ, datetime.timedelta(microseconds=900))
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "gunicorn.access")


@pytest.mark.parametrize(("environ", "response"), [
    ({"REMOTE_ADDR": "127.0.0.1", "REQUEST_METHOD": "GET", "RAW_URI": "/services?limit=5",
      "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_USER_AGENT": "wrk"}, _Response("200 OK", 1795)),
    ({"REQUEST_METHOD": "POST", "RAW_URI": '/x"y', "SERVER_PROTOCOL": "HTTP/1.0",
      "HTTP_USER_AGENT": 'agent "quoted"', "HTTP_REFERER": "http://r/",
      "HTTP_AUTHORIZATION": "Basic " + base64.b64encode(b'al"ice:pw').decode()}, _Response(404, 0)),
    ({"REMOTE_ADDR": "::1", "REQUEST_METHOD": "HEAD", "RAW_URI": "/", "SERVER_PROTOCOL": "HTTP/1.1"},
     _Response("304 Not Modified", None)),
])
def test_the_line_is_gunicorns(environ: dict[str, Any], response: _Response,
                               caplog: pytest.LogCaptureFixture) -> None:
    ours = _line(AccessLogger, environ, response, caplog)
    theirs = _line(Logger, environ, response, caplog)
    assert ours and ours == theirs


def test_another_format_goes_through_gunicorn(caplog: pytest.LogCaptureFixture) -> None:
    config = Config()
    config.set("accesslog", "-")
    config.set("access_log_format", "%(m)s %(U)s %(s)s")
    logger = AccessLogger(config)
    logger.access_log.propagate = True
    with caplog.at_level(logging.INFO, logger="gunicorn.access"):
        logger.access(_Response("200 OK", 5), _Request(), {"REQUEST_METHOD": "GET", "PATH_INFO": "/a",
                      "RAW_URI": "/a", "SERVER_PROTOCOL": "HTTP/1.1"}, datetime.timedelta(0))
    assert [r.getMessage() for r in caplog.records if r.name == "gunicorn.access"] == ["GET /a 200"]
