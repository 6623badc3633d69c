"""``If-Range`` on lists (docs/read-api.md, RFC 9110 §13.1.5): the validator is the selected representation's,
the ETag of the list without ``Range``; ``app.http.conditional.ranged_or_full`` decides."""

from __future__ import annotations

import pytest
from flask import Flask, Response
from flask.testing import FlaskClient
from werkzeug.exceptions import RequestedRangeNotSatisfiable

from app.http.conditional import compute_etag, ranged_or_full


def test_the_etag_of_the_whole_list_makes_the_range_apply(client: FlaskClient) -> None:
    whole = client.get("/tasks")
    assert whole.status_code == 200
    ranged = client.get("/tasks", headers={"Range": "items=1-2", "If-Range": whole.headers["ETag"]})
    assert ranged.status_code == 206 and ranged.headers["Content-Range"].startswith("items 1-2/")
    assert len(ranged.get_json()["items"]) == 2
    assert ranged.get_json()["items"] == whole.get_json()["items"][1:3]


def test_the_whole_lists_etag_of_another_variant_does_not_hold(client: FlaskClient) -> None:
    v1 = client.get("/tasks", headers={"Accept": "application/vnd.service.v1+json"}).headers["ETag"]
    other = client.get("/tasks", headers={"Range": "items=1-2", "If-Range": v1})   # application/json asked
    assert other.status_code == 200 and "Content-Range" not in other.headers


def test_if_range_holding_with_an_unsatisfiable_range_is_416(client: FlaskClient) -> None:
    whole = client.get("/tasks")
    response = client.get("/tasks", headers={"Range": "items=900-901", "If-Range": whole.headers["ETag"]})
    assert response.status_code == 416 and response.headers["Content-Range"].startswith("items */")


def test_the_206s_own_etag_still_holds_for_the_same_range(client: FlaskClient) -> None:
    ranged = client.get("/tasks", headers={"Range": "items=0-1"})
    again = client.get("/tasks", headers={"Range": "items=0-1", "If-Range": ranged.headers["ETag"]})
    assert again.status_code == 206
    shifted = client.get("/tasks", headers={"Range": "items=1-2", "If-Range": ranged.headers["ETag"]})
    assert shifted.status_code == 200   # that tag names another slice


def _render_counter(app: Flask, calls: list[str | None]) -> object:
    def render(range_header: str | None) -> Response:
        calls.append(range_header)
        if range_header == "items=9-9":
            raise RequestedRangeNotSatisfiable()
        body = b"part" if range_header else b"whole"
        return app.response_class(body, status=206 if range_header else 200, mimetype="application/json")
    return render


@pytest.mark.parametrize(("range_header", "if_range", "status", "renders"), [
    (None, None, 200, 1), ("items=0-0", None, 206, 1), (None, '"x"', 200, 1),
    ("items=0-0", compute_etag(b"whole"), 206, 2), ("items=0-0", compute_etag(b"part"), 206, 2),
    ("items=0-0", '"stale"', 200, 2), ("items=9-9", '"stale"', 200, 2),
    ("items=0-0", "W/" + compute_etag(b"whole"), 200, 2),
])
def test_ranged_or_full_renders_at_most_twice(app: Flask, range_header: str | None, if_range: str | None,
                                               status: int, renders: int) -> None:
    calls: list[str | None] = []
    with app.test_request_context("/tasks"):
        response = ranged_or_full(_render_counter(app, calls), range_header, if_range)  # type: ignore[arg-type]
    assert response.status_code == status and len(calls) == renders
