"""schemathesis fuzzes every documented operation of the live server: no 5xx, and every response
matches the OpenAPI document (status codes, content types, schemas). Bounded and seeded."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api_schema(server: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{server}/api")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_documented_operations_conform(case: schemathesis.Case) -> None:
    response = case.call(timeout=10)
    case.validate_response(response)
