"""RFC 9457 problems: shape, generic 404s for missing resources, generic HTTP errors, unexpected exceptions, the
browsable error registry, and the readiness gate before the first sync."""

from __future__ import annotations

import logging
import re

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.errors import REGISTRY
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.support import Harness

PROBLEM = "application/problem+json"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
MEMBERS = {"@context", "type", "title", "status", "detail", "instance", "requestId"}


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    return shared_client


def problem(response: TestResponse, status: int) -> dict:  # type: ignore[type-arg]
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM
    body = response.get_json(force=True)
    missing = MEMBERS - set(body)
    assert not missing, f"missing {missing}"
    assert body["@context"] == "/api/context.jsonld"
    assert body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["requestId"] == response.headers["Request-Id"]
    assert response.headers["Cache-Control"] == "no-store"
    return body  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- 404 on a detail
@pytest.mark.parametrize("kind", list(ResourceKind))
def test_a_missing_detail_is_a_generic_404(client: FlaskClient, kind: ResourceKind) -> None:
    """Choice: a missing detail is the generic ``about:blank`` 404, not a per-kind code
    (docs/read-api.md)."""
    path = f"{kind.spec.path}/does-not-exist"
    body = problem(client.get(path, headers={"Request-Id": "p-404"}), 404)
    assert body["type"] == "about:blank"
    assert body["title"] == "Not Found"
    assert "code" not in body
    assert "does-not-exist" in body["detail"] and kind.value in body["detail"]
    assert body["instance"] == path
    assert body["requestId"] == "p-404"


def test_ids_are_matched_exactly_not_by_prefix_or_name(client: FlaskClient) -> None:
    assert client.get(f"/services/{o.SVC_WEB[:12]}").status_code == 404
    assert client.get("/services/shop_web_api").status_code == 404
    assert client.get(f"/nodes/{o.NODE_WORKER}/tasks/extra").status_code == 404


def test_a_missing_parent_of_a_task_list_is_404(client: FlaskClient) -> None:
    assert problem(client.get("/nodes/nope/tasks"), 404)["type"] == "about:blank"
    assert problem(client.get("/services/nope/tasks"), 404)["type"] == "about:blank"


def test_the_problem_type_resolves_to_its_definition(client: FlaskClient) -> None:
    body = problem(client.get("/tasks?filter=slot%20%3E"), 400)
    definition = client.get(body["type"])
    assert definition.status_code == 200
    assert definition.get_json()["code"] == body["code"] == "FLT002"
    assert definition.get_json()["status"] == 400


# --------------------------------------------------------------------------- unknown paths
@pytest.mark.parametrize("accept", [None, "application/json", "*/*", "application/xml"])
def test_an_unknown_path_is_a_generic_404_problem(client: FlaskClient, accept: str | None) -> None:
    response = client.get("/no/such/thing", headers={"Accept": accept} if accept else {})
    body = problem(response, 404)
    assert body["type"] == "about:blank"
    assert body["title"] == "Not Found"
    assert body["instance"] == "/no/such/thing"


@pytest.mark.parametrize("path", ["/no/such/thing", "/services/x/y/z", "/dashboard/settings"])
def test_an_unknown_path_serves_the_shell_to_browsers(client: FlaskClient, path: str) -> None:
    response = client.get(path, headers={"Accept": BROWSER})
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert "<html" in response.get_data(as_text=True)


def test_an_unknown_path_with_a_json_extension_is_a_404_problem_for_browsers(client: FlaskClient) -> None:
    response = client.get("/no/such/thing.json", headers={"Accept": BROWSER})
    assert problem(response, 404)["type"] == "about:blank"


# --------------------------------------------------------------------------- other generic errors
def test_method_not_allowed_is_a_405_problem_with_allow(client: FlaskClient) -> None:
    response = client.delete("/services")
    body = problem(response, 405)
    assert body["type"] == "about:blank"
    assert body["title"] == "Method Not Allowed"
    assert {"GET", "HEAD"} <= {m.strip() for m in response.headers["Allow"].split(",")}


def test_not_acceptable_is_a_406_problem_with_a_code(client: FlaskClient) -> None:
    body = problem(client.get("/configs", headers={"Accept": "application/xml"}), 406)
    assert body["type"] == "/api/errors/API003"
    assert body["title"] == REGISTRY["API003"].title


def test_unsatisfiable_range_is_a_generic_416_problem(client: FlaskClient) -> None:
    response = client.get("/configs", headers={"Range": "items 10-20"})
    body = problem(response, 416)
    assert body["type"] == "about:blank"
    assert body["title"] == "Range Not Satisfiable"
    assert response.headers["Content-Range"] == "items */2"


# --------------------------------------------------------------------------- unexpected failures
def test_an_exception_in_a_view_is_a_500_problem_without_internals(harness: Harness,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def broken(kind: ResourceKind, object_id: str) -> None:
        raise RuntimeError("kaboom-internal-detail at /srv/app/cache.py")

    monkeypatch.setattr(harness.cache, "get", broken)
    with caplog.at_level(logging.ERROR):
        response = harness.app.test_client().get(f"/services/{o.SVC_WEB}", headers={"Request-Id": "r-500"})
    body = problem(response, 500)
    assert body["type"] == "about:blank"
    assert body["title"] == "Internal Server Error"
    assert body["requestId"] == "r-500"
    text = response.get_data(as_text=True)
    for leak in ("Traceback", "kaboom", "RuntimeError", "/srv/app", 'File "'):
        assert leak not in text
    logged = [record for record in caplog.records if record.exc_info]
    assert logged and "kaboom" in str(logged[0].exc_info[1])  # type: ignore[index]


def test_an_exception_in_a_list_view_is_a_500_problem(harness: Harness,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(kind: ResourceKind) -> list[object]:
        raise KeyError("secret-key-name")

    monkeypatch.setattr(harness.cache, "entries", broken)
    response = harness.app.test_client().get("/configs")
    problem(response, 500)
    assert "secret-key-name" not in response.get_data(as_text=True)


def test_the_app_keeps_serving_after_a_500(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    client = harness.app.test_client()
    with monkeypatch.context() as patch:
        patch.setattr(harness.cache, "entries", lambda kind: 1 / 0)
        assert client.get("/configs").status_code == 500
    assert client.get("/configs").status_code == 200


# --------------------------------------------------------------------------- the registry
def test_every_registered_code_is_well_formed() -> None:
    for code, definition in REGISTRY.items():
        assert re.fullmatch(r"[A-Z]{3}\d{3}", code), code
        assert definition.code == code
        assert 400 <= definition.status <= 599
        assert definition.title and definition.description and definition.suggestion


def test_api_errors_lists_every_code(client: FlaskClient) -> None:
    response = client.get("/api/errors")
    assert response.status_code == 200
    body = response.get_json()
    assert body["@type"] == "Collection"
    assert [item["code"] for item in body["items"]] == sorted(REGISTRY)
    assert body["total"] == len(REGISTRY)
    for item in body["items"]:
        definition = REGISTRY[item["code"]]
        assert item["@id"] == f"/api/errors/{item['code']}"
        assert item["@type"] == "ErrorDef"
        assert (item["status"], item["title"], item["description"], item["suggestion"]) == (
            definition.status, definition.title, definition.description, definition.suggestion)


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_api_errors_code_returns_that_definition(client: FlaskClient, code: str) -> None:
    response = client.get(f"/api/errors/{code}")
    assert response.status_code == 200
    body = response.get_json()
    assert body["@id"] == f"/api/errors/{code}"
    assert body["code"] == code
    assert body["status"] == REGISTRY[code].status


@pytest.mark.parametrize("code", ["XYZ999", "svc003", "SVC03"])
def test_an_unknown_error_code_is_a_generic_404(client: FlaskClient, code: str) -> None:
    body = problem(client.get(f"/api/errors/{code}"), 404)
    assert body["type"] == "about:blank"


@pytest.mark.parametrize("code", ["ENG001", "API001", "API003", "NOD003", "SVC003", "TSK002", "STK001",
                                  "CFG002", "SEC002", "NET002", "VOL002", "FLT001", "FLT002", "FLT003"])
def test_codes_the_service_already_answers_with_are_registered_with_their_status(code: str) -> None:
    expected = {"ENG001": 503, "API001": 406, "API003": 406, "FLT001": 400, "FLT002": 400, "FLT003": 400}
    assert REGISTRY[code].status == expected.get(code, 404)


# --------------------------------------------------------------------------- readiness gate
@pytest.mark.parametrize("path", ["/services", f"/services/{o.SVC_WEB}", "/stacks", "/tasks",
                                  f"/nodes/{o.NODE_WORKER}/tasks", "/volumes.json"])
def test_resource_reads_before_the_first_sync_are_503_eng001(unsynced: Harness, path: str) -> None:
    response = unsynced.app.test_client().get(path)
    body = problem(response, 503)
    assert body["type"] == "/api/errors/ENG001"
    assert response.headers.get("Retry-After")


def test_the_json_extension_is_gated_even_for_browsers(unsynced: Harness) -> None:
    response = unsynced.app.test_client().get("/services.json", headers={"Accept": BROWSER})
    body = problem(response, 503)
    assert body["type"] == "/api/errors/ENG001"
    assert body["instance"] == "/services.json"


@pytest.mark.parametrize(("path", "status"), [
    ("/api", 200), ("/api/context.jsonld", 200), ("/api/errors", 200), ("/api/errors/ENG001", 200),
    ("/-/health", 200), ("/-/ready", 503),
])
def test_meta_and_documentation_are_not_gated(unsynced: Harness, path: str, status: int) -> None:
    response = unsynced.app.test_client().get(path)
    assert response.status_code == status
    assert response.mimetype != PROBLEM


def test_health_reports_error_and_ready_not_ready_before_the_first_sync(unsynced: Harness) -> None:
    client = unsynced.app.test_client()
    assert client.get("/-/health").get_json()["status"] == "error"
    ready = client.get("/-/ready").get_json()
    assert (ready["status"], ready["synced"]) == ("not_ready", False)


def test_browsers_get_a_page_saying_so_before_the_first_sync(unsynced: Harness) -> None:
    response = unsynced.app.test_client().get("/services", headers={"Accept": BROWSER})
    assert response.status_code == 503   # an empty list would be shown as the current cluster
    assert response.mimetype == "text/html" and b"ENG001" in response.data


def test_the_gate_opens_after_the_first_sync(unsynced: Harness) -> None:
    client = unsynced.app.test_client()
    assert client.get("/services").status_code == 503
    unsynced.start()
    try:
        assert client.get("/services").status_code == 200
        assert client.get("/-/ready").get_json()["status"] == "ready"
        assert client.get("/-/health").get_json()["status"] == "ok"
    finally:
        unsynced.stop()


@pytest.mark.parametrize(("path", "accept"), [("/services.html", "application/json"),
                                              ("/services", "text/html; charset=utf-8")])
def test_the_dashboard_page_loads_before_the_first_sync(unsynced: Harness, path: str, accept: str) -> None:
    response = unsynced.app.test_client().get(path, headers={"Accept": accept})
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert response.mimetype == "text/html" and b"first engine sync" in response.data

