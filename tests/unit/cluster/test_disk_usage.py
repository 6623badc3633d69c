"""app.engine.system: the four disk-usage rows computed as ``docker system df`` does, the engine errors
mapped to SWM004/SWM005/ENG001, and the local node id fetched once in the background."""

from __future__ import annotations

from typing import Any

import docker.errors
import gevent
import pytest
import requests

from app.engine.system import SystemInfo, summarize
from app.errors import ProblemError
from tests.unit.support import wait_until

DF: dict[str, Any] = {
    "LayersSize": 1000,
    "Images": [{"Containers": 2, "Size": 600, "SharedSize": 100}, {"Containers": 0, "Size": 400, "SharedSize": 0}],
    "Containers": [{"State": "running", "SizeRw": 10}, {"State": "exited", "SizeRw": 5},
                   {"State": "paused", "SizeRw": 1}, {"State": "created"}],
    "Volumes": [{"UsageData": {"RefCount": 1, "Size": 70}}, {"UsageData": {"RefCount": 0, "Size": 30}},
                {"UsageData": {"RefCount": 0, "Size": -1}}],
    "BuildCache": [{"InUse": True, "Shared": False, "Size": 8}, {"InUse": False, "Shared": False, "Size": 4},
                   {"InUse": False, "Shared": True, "Size": 100}],
}


def test_summarize_computes_the_cli_rows() -> None:
    rows = {row["type"]: row for row in summarize(DF)}
    assert list(rows) == ["images", "containers", "volumes", "buildCache"]
    assert rows["images"] == {"type": "images", "count": 2, "active": 1, "totalSize": 1000, "reclaimable": 500}
    assert rows["containers"] == {"type": "containers", "count": 4, "active": 2, "totalSize": 16,
                                  "reclaimable": 5}
    assert rows["volumes"] == {"type": "volumes", "count": 3, "active": 1, "totalSize": 100, "reclaimable": 30}
    assert rows["buildCache"] == {"type": "buildCache", "count": 3, "active": 1, "totalSize": 12,
                                  "reclaimable": 4}


def test_summarize_an_empty_engine() -> None:
    assert [row["count"] for row in summarize({"Images": None, "BuildCache": None})] == [0, 0, 0, 0]


class FakeSystem:
    def __init__(self, df: Any = None, error: Exception | None = None, node_id: str = "node-1") -> None:
        self.answer, self.error, self.node_id, self.info_calls = df, error, node_id, 0

    def df(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.answer

    def info(self) -> dict[str, Any]:
        self.info_calls += 1
        gevent.sleep(0.01)   # a slow engine: the answer comes after the caller has moved on
        return {"Swarm": {"NodeID": self.node_id}}


def api_error(status: int) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("engine says no", response=response)


@pytest.mark.parametrize(("error", "code", "status"), [
    (api_error(404), "SWM004", 501), (api_error(501), "SWM004", 501), (api_error(500), "SWM005", 500),
    (requests.exceptions.ConnectionError("refused"), "ENG001", 503), (OSError("gone"), "ENG001", 503),
])
def test_engine_errors_map_to_codes(error: Exception, code: str, status: int) -> None:
    with pytest.raises(ProblemError) as raised:
        SystemInfo(lambda: FakeSystem(error=error)).disk_usage()
    assert raised.value.code == code and raised.value.status == status


def test_an_answer_that_is_no_object_is_swm005() -> None:
    with pytest.raises(ProblemError) as raised:
        SystemInfo(lambda: FakeSystem(df=["no"])).disk_usage()
    assert raised.value.code == "SWM005"


def test_local_node_id_is_fetched_once_in_the_background() -> None:
    fake = FakeSystem(df=DF)
    system = SystemInfo(lambda: fake)
    assert system.local_node_id() is None           # unknown: the fetch runs in its own greenlet
    assert system.local_node_id() is None           # ... and is not started twice
    wait_until(lambda: system.local_node_id() == "node-1", message="the background fetch")
    assert system.local_node_id() == "node-1" and fake.info_calls == 1
