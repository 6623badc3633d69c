"""Engine loss on a lab instance of its own: the cache keeps serving, marked stale, readiness is 503,
health stays 200; after the engine returns, the watcher reconnects, resyncs and follows events again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import docker
import pytest

from app.resources import ResourceKind
from tests.conftest import check_engine, lab, start_runtime_app, wait_for
from tests.integration.engine_state import differences, engine_listing, sleeper

pytestmark = pytest.mark.integration
INSTANCE = "fault"


@pytest.fixture(scope="module")
def fault_host(docker_host: str) -> Iterator[str]:
    host = lab("up", "--name", INSTANCE)
    check_engine(host)
    yield host
    lab("down", "--name", INSTANCE, timeout=120)


def test_engine_loss_marks_state_stale_and_reconnect_converges(fault_host: str) -> None:
    app, runtime = start_runtime_app(fault_host)
    client = app.test_client()
    try:
        assert client.get("/-/ready").status_code == 200
        services_before = client.get("/services").get_json()["total"]
        assert services_before > 0

        lab("engine-stop", "--name", INSTANCE, timeout=60)
        wait_for(lambda: client.get("/-/ready").status_code == 503, 10, message="readiness 503")
        ready = client.get("/-/ready").get_json()
        assert ready["status"] == "not_ready" and ready["engineConnected"] is False
        assert ready["maxStalenessSeconds"] is not None
        assert client.get("/-/health").status_code == 200
        stale = client.get("/services")
        assert stale.status_code == 200, "the last state must still be served"
        assert stale.headers["Cache-Freshness"] == "stale"
        assert stale.get_json()["total"] == services_before

        lab("engine-start", "--name", INSTANCE, timeout=120)
        wait_for(lambda: client.get("/-/ready").status_code == 200, 60, interval=0.2,
                 message="readiness after the engine returned")
        assert client.get("/services").headers["Cache-Freshness"] == "live"
        api = docker.APIClient(base_url=fault_host, version="1.41", timeout=30)
        kinds = tuple(k for k in ResourceKind if k not in (ResourceKind.TASK, ResourceKind.STACK))
        wait_for(lambda: differences(runtime.cache, engine_listing(api), kinds) == [], 15,
                 interval=0.25, message="cache equal to the engine after reconnect")

        # The event stream is followed again: a new service shows up within 2 s.
        dclient = docker.DockerClient(base_url=fault_host, version="1.41", timeout=30)
        service = sleeper(dclient, f"shoal-it-{uuid.uuid4().hex[:8]}", replicas=0)
        try:
            wait_for(lambda: runtime.cache.get(ResourceKind.SERVICE, service.id) is not None, 2.0,
                     interval=0.01, message="a service created after the reconnect")
        finally:
            service.remove()
        assert runtime.watcher.stats.full_syncs >= 2
    finally:
        runtime.stop()
