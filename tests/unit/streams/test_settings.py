"""The SSE configuration keys: server.sse.keepalive beside server.sse.batch_interval."""

from __future__ import annotations

import pytest

from app.config import ConfigError, load_settings


def test_keepalive_defaults_to_15_seconds() -> None:
    assert load_settings({}).sse_keepalive == pytest.approx(15.0)


def test_keepalive_from_the_environment() -> None:
    assert load_settings({"SERVICE_SSE_KEEPALIVE": "2.5s"}).sse_keepalive == pytest.approx(2.5)


@pytest.mark.parametrize("value", ["0s", "-1", "soon", "nan"])
def test_a_bad_keepalive_fails_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as failure:
        load_settings({"SERVICE_SSE_KEEPALIVE": value})
    assert "server.sse.keepalive" in str(failure.value) and "SERVICE_SSE_KEEPALIVE" in str(failure.value)
