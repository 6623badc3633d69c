"""The sub-resource routes on the synthetic cluster: GET envelopes from the cache, generic 404, the OpenAPI
document of every route, admission modes, and the level-1 default refusing the tier-2 writes before any body
is read."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from app.http import admission
from app.writes.service_spec import SUBRESOURCES
from tests.unit.objects import SVC_WEB


def test_get_answers_the_envelope_from_the_cache(client: FlaskClient) -> None:
    for name, sub in SUBRESOURCES.items():
        response = client.get(f"/services/{SVC_WEB}/{name}")
        assert response.status_code == 200, name
        body = response.get_json()
        assert body["@id"] == f"/services/{SVC_WEB}/{name}" and body["@type"] == sub.jsonld_type
        expected = {"mode", "replicas"} if name == "mode" else {"endpointMode"} if name == "endpoint-mode" \
            else {sub.key}
        assert set(body) - {"@context", "@id", "@type"} == expected, name
    missing = client.get("/services/nope/env")
    assert missing.status_code == 404 and missing.get_json()["type"] == "about:blank"


def test_every_route_is_documented(client: FlaskClient) -> None:
    paths = client.get("/api").get_json()["paths"]
    for name, sub in SUBRESOURCES.items():
        operations = paths[f"/services/{{id}}/{name}"]
        methods = {"get", "put"} | ({"patch"} if len(sub.operations) == 2 else set())
        assert set(operations) - {"parameters", "options"} == methods, name   # OPTIONS: every URL (app/http/options.py)
        schema: dict[str, Any] = operations["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert {"@context", "@id", "@type"} <= set(schema["required"])
        assert {"403", "404", "409", "412"} <= set(operations["put"]["responses"])
        if "patch" in operations:
            patch = operations["patch"]
            assert "415" in patch["responses"]
            assert set(patch["requestBody"]["content"]) == {"application/json-patch+json",
                                                           "application/merge-patch+json"}


def test_reads_wait_in_the_light_lane_and_writes_are_exempt(app: Flask) -> None:
    for name in SUBRESOURCES:
        view: Any = app.view_functions[f"service_subresources.service_{name.replace('-', '_')}"]
        view_class = view.view_class
        assert view_class.get.__shoal_admission__ == admission.LIGHT
        assert view_class.put.__shoal_admission__ == admission.EXEMPT
        if hasattr(view_class, "patch"):
            assert view_class.patch.__shoal_admission__ == admission.EXEMPT


def test_the_default_level_refuses_tier_2_before_reading_the_body(client: FlaskClient) -> None:
    response = client.get(f"/services/{SVC_WEB}/env")
    assert response.headers["Allow"] == "GET, HEAD" and "Accept-Patch" not in response.headers
    refused = client.patch(f"/services/{SVC_WEB}/env", data=b"not json", content_type="text/plain")
    assert refused.status_code == 403 and refused.get_json()["code"] == "OPS001"
