"""Meta endpoints' bodies: health's build information, and self-metrics that can be switched off."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app import version
from tests.fakes import FakeEngine
from tests.unit.support import build_harness

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    return shared_client


def test_health_reports_version_commit_build_date_and_operations_level(client: FlaskClient) -> None:
    body = client.get("/-/health").get_json()
    assert {"status", "version", "commit", "buildDate", "operationsLevel"} <= set(body)
    assert body["status"] == "ok"
    assert body["version"] == version.VERSION
    assert body["operationsLevel"] == 1


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="runs from a git checkout only")
def test_the_commit_is_the_checkouts_head() -> None:
    version.build_info.cache_clear()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    info = version.build_info()
    assert info.commit == head
    assert info.build_date is not None and info.build_date[:4].isdigit()


def test_build_information_set_by_packaging_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_BUILD_COMMIT", "abc123")
    monkeypatch.setenv("SHOAL_BUILD_DATE", "2026-11-01T00:00:00Z")
    version.build_info.cache_clear()
    try:
        assert version.build_info() == version.BuildInfo("abc123", "2026-11-01T00:00:00Z")
    finally:
        version.build_info.cache_clear()


def test_without_git_the_commit_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHOAL_BUILD_COMMIT", raising=False)
    monkeypatch.delenv("SHOAL_BUILD_DATE", raising=False)
    monkeypatch.setattr(version, "_SOURCE_TREE", tmp_path)
    version.build_info.cache_clear()
    try:
        assert version.build_info() == version.BuildInfo("unknown", None)
    finally:
        version.build_info.cache_clear()


def test_self_metrics_serve_prometheus_text(client: FlaskClient) -> None:
    response = client.get("/-/metrics")
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    assert "# TYPE" in response.get_data(as_text=True)


def test_self_metrics_count_watcher_incidents_and_task_listings(client: FlaskClient) -> None:
    from app.runtime import runtime_of
    runtime = runtime_of(client.application)
    runtime.watcher.stats.silent_streams = 3
    runtime.watcher.task_poller.stats.full_listings = 2
    text = client.get("/-/metrics").get_data(as_text=True)
    assert 'shoal_watcher_incidents_total{incident="silent_stream"} 3.0' in text
    assert 'shoal_watcher_incidents_total{incident="inspect_abandoned"} 0.0' in text
    assert 'shoal_task_listings_total{scope="full"} 2.0' in text
    assert "shoal_task_count_polls_total" in text


def test_disabled_self_metrics_do_not_exist(fake_engine: FakeEngine) -> None:
    built = build_harness(fake_engine, self_metrics=False)
    response = built.app.test_client().get("/-/metrics")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["type"] == "about:blank"
