"""Start-up exposure warnings and ``/-/ready``'s ``unauthenticatedWrites`` (``app.config.exposure``), and the
strict parsing of trusted-proxy CIDRs."""

from __future__ import annotations

import logging

import pytest

from app.config import ConfigError, Settings, load_settings
from app.config.exposure import is_local, unauthenticated_writes, warn_exposure
from tests.fakes import FakeEngine
from tests.unit.support import build_harness


@pytest.mark.parametrize(("bind", "local"), [
    ("127.0.0.1:9000", True), ("127.8.9.10:9000", True), ("[::1]:9000", True), ("localhost:9000", True),
    ("unix:/run/shoal.sock", True), ("[::ffff:127.0.0.1]:9000", True),
    ("0.0.0.0:9000", False), ("[::]:9000", False), ("10.0.0.9:9000", False), ("shoal.example.com:9000", False),
    ("fd://3", False), ("192.168.1.10", False),
])
def test_what_counts_as_local(bind: str, local: bool) -> None:
    assert is_local(bind) is local


@pytest.mark.parametrize(("settings", "binds", "exposed"), [
    (Settings(), ["0.0.0.0:9000"], True),                                  # the defaults
    (Settings(), ["127.0.0.1:9000", "10.0.0.9:9000"], True),               # one exposed address is enough
    (Settings(), ["127.0.0.1:9000"], False),
    (Settings(operations_level=0), ["0.0.0.0:9000"], False),               # read-only
    (Settings(auth_mode="headers", headers_subject="X-User", trusted_proxies=("10.0.0.5/32",)),
     ["0.0.0.0:9000"], False),
])
def test_unauthenticated_writes(settings: Settings, binds: list[str], exposed: bool) -> None:
    assert unauthenticated_writes(settings, binds) is exposed


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "app.config.exposure" and r.levelno == logging.WARNING]


def test_one_structured_warning_when_writes_are_open(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    warn_exposure(Settings(operations_level=2), ["0.0.0.0:9000", "127.0.0.1:9001"])
    (record,) = _warnings(caplog)
    assert "WITHOUT AUTHENTICATION" in record.getMessage() and "0.0.0.0:9000" in record.getMessage()
    assert record.__dict__["event"] == "unauthenticated_writes"
    assert record.__dict__["listen"] == ["0.0.0.0:9000"] and record.__dict__["operations_level"] == 2
    caplog.clear()
    warn_exposure(Settings(), ["127.0.0.1:9000", "unix:/tmp/s.sock"])
    warn_exposure(Settings(operations_level=0), ["0.0.0.0:9000"])
    assert _warnings(caplog) == []


@pytest.mark.parametrize("everyone", ["0.0.0.0/0", "::/0"])
def test_trusting_every_address_is_warned(everyone: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = load_settings({"SERVICE_AUTH_MODE": "headers", "SERVICE_AUTH_HEADERS_SUBJECT": "X-User",
                              "SERVICE_TRUSTED_PROXIES": f"10.0.0.5, {everyone}"})
    warn_exposure(settings, ["127.0.0.1:9000"])
    (record,) = _warnings(caplog)
    assert everyone in record.getMessage() and "any identity" in record.getMessage()
    assert record.__dict__["trusted_proxies"] == [everyone]


@pytest.mark.parametrize(("value", "shown"), [
    ("192.168.1.10/1", "host bits set"), ("10.0.0.5/8", "host bits set"), ("fd00::1/8", "host bits set"),
    ("10.0.0.0/33", "not an IP address or CIDR"), ("example.com", "not an IP address or CIDR"),
])
def test_trusted_proxies_are_parsed_strictly(value: str, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"SERVICE_TRUSTED_PROXIES": f"127.0.0.1, {value}"})
    message = str(caught.value)
    assert "SERVICE_TRUSTED_PROXIES" in message and "server.trusted_proxies" in message
    assert shown in message and repr(value) in message


def test_network_addresses_and_plain_ips_still_parse() -> None:
    settings = load_settings({"SERVICE_TRUSTED_PROXIES": "192.168.0.0/16, 10.0.0.5, ::1, fd00::/8"})
    assert settings.trusted_proxies == ("192.168.0.0/16", "10.0.0.5/32", "::1/128", "fd00::/8")


def test_ready_shows_unauthenticated_writes() -> None:
    open_harness = build_harness(FakeEngine(), listen_addr=Settings().listen_addr)     # 0.0.0.0:9000, level 1
    assert open_harness.app.test_client().get("/-/ready").get_json()["unauthenticatedWrites"] is True
    open_harness.runtime.binds = ("127.0.0.1:9000",)                                   # what gunicorn bound
    assert open_harness.app.test_client().get("/-/ready").get_json()["unauthenticatedWrites"] is False
    closed = build_harness(FakeEngine(), operations_level=0)
    assert closed.app.test_client().get("/-/ready").get_json()["unauthenticatedWrites"] is False
