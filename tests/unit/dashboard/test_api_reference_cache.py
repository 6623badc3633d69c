"""/api's reference body is rendered once per process and ?q= (app/dashboard/api_reference.py)."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient
from markupsafe import Markup

from app.dashboard import api_reference

HTML = {"Accept": "text/html"}


def test_the_second_view_serves_the_kept_body(app: Flask, client: FlaskClient) -> None:
    first = client.get("/api", headers=HTML)
    assert first.status_code == 200 and b'class="op"' in first.data
    kept = app.extensions[api_reference._KEY]
    assert list(kept) == [""]
    kept[""] = Markup('<p id="kept-marker">kept</p>')   # what a second render would not produce
    again = client.get("/api", headers=HTML)
    assert b'id="kept-marker"' in again.data and b'class="op"' not in again.data


def test_queries_are_kept_apart_and_bounded(app: Flask, client: FlaskClient) -> None:
    for index in range(api_reference.KEPT + 3):
        assert client.get(f"/api?q=scale{index}", headers=HTML).status_code == 200
    kept = app.extensions[api_reference._KEY]
    assert len(kept) == api_reference.KEPT and "scale0" not in kept and f"scale{api_reference.KEPT + 2}" in kept
    long = "x" * (api_reference.MAX_QUERY + 1)
    assert client.get(f"/api?q={long}", headers=HTML).status_code == 200 and long not in kept
