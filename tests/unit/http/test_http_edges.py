"""HTTP edges (docs/read-api.md; each red on the main before it): Last-Modified after a cross-reference
change, an ETag per negotiated variant (full SHA-256), If-Range, exact names over format extensions,
bounded metrics labels, and redirects that never use the client's Host."""

from __future__ import annotations

import hashlib
import re

from flask.testing import FlaskClient

from app.http.negotiation import JSON_V1
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.support import Harness, wait_until

K = ResourceKind
DETAIL = f"/services/{o.SVC_WEB}"


# --------------------------------------------------------------------------- Last-Modified (point 2)
def test_if_modified_since_sees_a_change_of_an_embedded_task(harness: Harness) -> None:
    harness.app.config["SHOAL_STARTED_AT"] = 0.0   # the fixture's engine times, not the app's start
    client = harness.app.test_client()
    first = client.get(DETAIL)
    since = first.headers["Last-Modified"]
    assert client.get(DETAIL, headers={"If-Modified-Since": since}).status_code == 304
    task_id = next(t.id for t in harness.cache.tasks_of_service(o.SVC_WEB))
    raw = dict(harness.engine.objects[K.TASK][task_id])
    raw["Status"] = {**raw["Status"], "State": "failed"}
    raw["Version"] = {"Index": raw["Version"]["Index"] + 10}   # the service's own UpdatedAt does not move
    harness.engine.objects[K.TASK][task_id] = raw
    harness.engine.emit("container", "die", "c" * 64)
    wait_until(lambda: harness.cache.get(K.TASK, task_id).activation["state"] == "failed", 5,  # type: ignore[union-attr]
               message="the failed task")
    again = client.get(DETAIL, headers={"If-Modified-Since": since})
    assert again.status_code == 200
    assert again.get_data() != first.get_data()
    assert again.headers["Last-Modified"] != since


def test_last_modified_is_never_before_the_app_started(harness: Harness) -> None:
    """A restarted service has no record of what its details embedded before: a client's date from the
    previous process (after the engine time, before this start) must not earn a 304."""
    client = harness.app.test_client()
    started = harness.app.config["SHOAL_STARTED_AT"]
    response = client.get(DETAIL)
    assert response.last_modified is not None and response.last_modified.timestamp() >= int(started)
    assert client.get(DETAIL, headers={"If-Modified-Since": "Fri, 03 May 2024 00:00:00 GMT"}).status_code == 200


def test_a_stack_detail_has_no_last_modified(client: FlaskClient) -> None:
    assert "Last-Modified" not in client.get("/stacks/shop").headers


# --------------------------------------------------------------------------- ETag (point 3)
def test_each_variant_has_its_own_etag_and_it_is_the_full_sha256(client: FlaskClient) -> None:
    plain = client.get(DETAIL, headers={"Accept": "application/json"})
    pinned = client.get(DETAIL, headers={"Accept": JSON_V1})
    assert plain.get_data() == pinned.get_data()
    digest = hashlib.sha256(plain.get_data()).hexdigest()
    assert plain.headers["ETag"] == f'"{digest}"'
    assert pinned.headers["ETag"] == f'"{digest}-vnd.service.v1+json"'
    # one variant's tag does not validate the other
    assert client.get(DETAIL, headers={"Accept": JSON_V1, "If-None-Match": plain.headers["ETag"]}).status_code == 200
    assert client.get(DETAIL, headers={"Accept": JSON_V1, "If-None-Match": pinned.headers["ETag"]}).status_code == 304


def test_if_range_with_the_current_etag_gives_206(client: FlaskClient) -> None:
    ranged = client.get("/tasks", headers={"Range": "items=1-2"})
    assert ranged.status_code == 206
    again = client.get("/tasks", headers={"Range": "items=1-2", "If-Range": ranged.headers["ETag"]})
    assert again.status_code == 206 and again.headers["Content-Range"] == ranged.headers["Content-Range"]


def test_if_range_with_another_validator_gives_the_whole_page(client: FlaskClient) -> None:
    for validator in ('"stale"', 'W/"stale"', "Thu, 02 May 2024 11:30:15 GMT", "garbage"):
        response = client.get("/tasks", headers={"Range": "items=1-2", "If-Range": validator})
        assert response.status_code == 200, validator
        assert "Content-Range" not in response.headers
        assert len(response.get_json()["items"]) == response.get_json()["total"]


def test_if_range_failing_makes_an_unsatisfiable_range_a_200(client: FlaskClient) -> None:
    assert client.get("/tasks", headers={"Range": "items=900-901"}).status_code == 416
    assert client.get("/tasks", headers={"Range": "items=900-901", "If-Range": '"x"'}).status_code == 200


# --------------------------------------------------------------------------- exact names (point 4)
def test_an_exact_name_wins_over_the_format_extension(harness: Harness) -> None:
    harness.engine.objects[K.VOLUME]["backup.json"] = o.volume("backup.json")
    harness.engine.objects[K.VOLUME]["backup"] = o.volume("backup", driver="other")
    harness.engine.emit("volume", "create", "backup.json")
    harness.engine.emit("volume", "create", "backup")
    wait_until(lambda: harness.cache.get(K.VOLUME, "backup.json") and harness.cache.get(K.VOLUME, "backup"), 5,
               message="both volumes")
    client = harness.app.test_client()
    exact = client.get("/volumes/backup.json")
    assert exact.status_code == 200
    assert exact.get_json()["volume"]["Name"] == "backup.json"
    assert exact.get_json()["@id"] == "/volumes/backup.json"
    assert exact.headers["Content-Type"] == "application/json"
    # the extension still selects the format where no such name exists
    assert client.get("/volumes/backup.json.json").get_json()["volume"]["Name"] == "backup.json"
    assert client.get("/volumes/backup.html").mimetype == "text/html"
    assert client.get("/volumes/backup.json", headers={"Accept": "text/html"}).mimetype == "text/html"


# --------------------------------------------------------------------------- metrics labels (point 6)
def test_metrics_labels_are_bounded(client: FlaskClient) -> None:
    client.get(DETAIL)
    client.get("/no/such/path/abc123")
    client.open("/services", method="BREW")
    text = client.get("/-/metrics").get_data(as_text=True)
    routes = set(re.findall(r'shoal_http_requests_total\{[^}]*route="([^"]*)"', text))
    methods = set(re.findall(r'shoal_http_requests_total\{[^}]*method="([^"]*)"', text))
    assert "/services/{id}" in routes and "unmatched" in routes
    assert not any(o.SVC_WEB in route or "abc123" in route or "<" in route for route in routes)
    assert "BREW" not in methods and "other" in methods


# --------------------------------------------------------------------------- redirects (point 7)
def test_no_redirect_uses_the_clients_host(client: FlaskClient) -> None:
    for path in ("/api//errors", "/services//x", "//services", "/volumes//x.json"):
        response = client.get(path, headers={"Host": "evil.example"})
        location = response.headers.get("Location", "")
        assert "evil.example" not in location, (path, location)
        assert not location.startswith("//"), (path, location)


# --------------------------------------------------------------------------- /api agrees with responses (point 5)
def test_the_document_describes_what_is_served(client: FlaskClient) -> None:
    document = client.get("/api").get_json()
    schemas = document["components"]["schemas"]
    stack = schemas["StackDetailV1"]["properties"]["stack"]["$ref"]
    assert stack != "#/components/schemas/StackDetailV1"
    assert "services" in schemas[stack.rsplit("/", 1)[1]]["properties"]
    problem = schemas["ProblemV1"]["properties"]
    assert "field" in problem and "null" in problem["position"]["type"]
    for kind in ResourceKind:
        responses = document["paths"][kind.spec.path]["get"]["responses"]
        assert "Content-Range" in responses["206"]["headers"], kind


# --------------------------------------------------------------------------- server errors (point 8)
def test_server_error_answers_carry_the_same_security_headers(client: FlaskClient) -> None:
    from app.http.security import security_headers

    served = client.get("/no/such/path").headers
    for name, value in security_headers(tls=False):
        assert served[name] == value


def test_gunicorn_and_shoal_use_the_same_request_limits() -> None:
    import runpy
    from pathlib import Path

    from app.http import server_errors

    conf = runpy.run_path(str(Path(__file__).resolve().parents[3] / "gunicorn.conf.py"))
    assert conf["limit_request_line"] == server_errors.REQUEST_LINE_LIMIT
    assert conf["limit_request_fields"] == server_errors.HEADER_FIELDS_LIMIT
    assert conf["limit_request_field_size"] == server_errors.HEADER_FIELD_SIZE_LIMIT
    assert conf["worker_class"].__name__ == "ProblemGeventWorker"


def test_a_server_problem_is_a_complete_http_response() -> None:
    import json

    from app.http.server_errors import problem_bytes

    raw = problem_bytes(431, "x" * 500, base_path="/shoal", tls=True)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 431 Request Header Fields Too Large"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body)
    assert headers["Strict-Transport-Security"].startswith("max-age=")
    problem = json.loads(body)
    assert problem["requestId"] == headers["Request-Id"] and problem["@context"] == "/shoal/api/context.jsonld"
    assert len(problem["detail"]) == 200


def test_a_routing_redirect_is_relative_and_keeps_the_base_path() -> None:
    from tests.fakes import FakeEngine
    from tests.unit.objects import cluster
    from tests.unit.support import build_harness

    harness = build_harness(FakeEngine(cluster()), base_path="/shoal")
    harness.app.add_url_rule("/probe/", "probe", lambda: "ok")   # a trailing-slash rule werkzeug redirects to
    response = harness.app.test_client().get("/shoal/probe.json?x=1", headers={"Host": "evil.example"})
    assert response.status_code == 308
    assert response.headers["Location"] == "/shoal/probe/.json?x=1"
