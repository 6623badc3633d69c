"""schemathesis fuzzes every documented operation of the live server: no 5xx, and every response
matches the OpenAPI document (status codes, content types, headers, schemas). Bounded and seeded.

Driven through schemathesis' Python API rather than its pytest plugin, which pytest 9 breaks.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import allow_header_conformance, positive_data_acceptance

pytestmark = pytest.mark.integration
EXAMPLES_PER_OPERATION = 30
# A schema-valid string can still be an invalid CEL expression: the documented answer is a 400 FLT problem,
# so "any schema-valid request is accepted" cannot hold for `filter`. Every other check stays on.
EXCLUDED = [positive_data_acceptance]
# The session server has no Prometheus: the metrics proxy answers its documented 503 MTR001 (and 502 MTR002),
# which the "no server error" check would count as failures. Everything else is checked there too.
UPSTREAM_PATHS = ("/metrics", "/cluster/metrics")
# OPTIONS answers the caller's Allow (operations level, ACL: app.http.options), so it may list fewer methods
# than the path documents (a DELETE above the level); schemathesis wants all of them. Checked here instead:
# never a method the path does not document.
_DOCUMENTED = {"get", "head", "post", "put", "patch", "delete", "options"}


def test_documented_operations_conform(server: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/api")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the document should describe every read endpoint"
    for operation in operations:
        excluded = EXCLUDED + ([not_a_server_error] if operation.path.startswith(UPSTREAM_PATHS) else [])
        if operation.method.upper() == "OPTIONS":
            excluded = [*excluded, allow_header_conformance]
        declared = {method for method in operation.schema[operation.path] if method in _DOCUMENTED} | {"head"}

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def conforms(case: schemathesis.Case) -> None:
            response = case.call(base_url=server, timeout=10)
            case.validate_response(response, excluded_checks=excluded)  # noqa: B023 (called in this iteration)
            if case.method.upper() == "OPTIONS" and response.status_code == 200:
                values = response.headers.get("allow", response.headers.get("Allow"))
                assert values is not None, case.path      # always there; empty when nothing is allowed
                allow = values if isinstance(values, str) else ", ".join(values)
                advertised = {m.strip().lower() for m in allow.split(",") if m.strip()}
                assert advertised <= declared, (case.path, allow)  # noqa: B023 (this iteration)

        conforms()
