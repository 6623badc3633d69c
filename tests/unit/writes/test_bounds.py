"""Bounds on what one write may ask (app.writes.bounds): at the bound it passes, one past it is API018 naming
the bound, and only growth is refused."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import Settings
from app.errors import ProblemError
from app.writes.bounds import WriteBounds, check_patch, check_spec

BOUNDS = WriteBounds(max_replicas=10, max_labels=3, max_env=4, max_patch_operations=5, max_string_length=100)


def service(replicas: int = 1, labels: int = 0, env: int = 0, image: str = "busybox") -> dict[str, Any]:
    return {"Labels": {f"l{i}": "v" for i in range(labels)},
            "Mode": {"Replicated": {"Replicas": replicas}},
            "TaskTemplate": {"ContainerSpec": {"Image": image, "Env": [f"E{i}=x" for i in range(env)]}}}


def refusal(call: Any) -> ProblemError:
    with pytest.raises(ProblemError) as caught:
        call()
    assert caught.value.code == "API018" and caught.value.status == 400
    return caught.value


def test_replicas_at_the_bound_pass_and_one_past_is_refused_with_the_bound() -> None:
    check_spec(service(1), service(10), BOUNDS)
    problem = refusal(lambda: check_spec(service(1), service(11), BOUNDS))
    assert problem.extra == {"field": "replicas", "limit": 10, "requested": 11, "setting": "writes.max_replicas"}
    assert "11" in problem.detail and "10" in problem.detail and "writes.max_replicas" in problem.detail


def test_a_billion_replicas_is_refused_at_the_default_bound() -> None:
    bounds = WriteBounds.of(Settings())
    assert bounds.max_replicas == 1000
    assert refusal(lambda: check_spec(service(1), service(1_000_000_000), bounds)).extra["requested"] == 10**9


def test_a_value_already_past_the_bound_may_stay_or_shrink_but_not_grow() -> None:
    check_spec(service(50), service(50, labels=1), BOUNDS)      # a label edit keeps 50 replicas
    check_spec(service(50), service(20), BOUNDS)                # scaling down toward the bound
    refusal(lambda: check_spec(service(50), service(51), BOUNDS))


def test_job_concurrency_is_bounded_like_replicas() -> None:
    job = {"Mode": {"ReplicatedJob": {"MaxConcurrent": 11, "TotalCompletions": 10**6}}}
    assert refusal(lambda: check_spec({}, job, BOUNDS)).extra["field"] == "mode.maxConcurrent"


@pytest.mark.parametrize(("after", "field", "requested"), [
    (service(labels=4), "labels", 4),
    (service(env=5), "env", 5),
    ({"TaskTemplate": {"ContainerSpec": {"Labels": {str(i): "" for i in range(4)}}}}, "containerLabels", 4),
    ({"Labels": {"node.role": "x" * 101}}, "string", 101),
    ({"Labels": {"k" * 101: "v"}}, "string", 101),
])
def test_counts_and_strings_one_past_the_bound(after: dict[str, Any], field: str, requested: int) -> None:
    problem = refusal(lambda: check_spec({}, after, BOUNDS))
    assert (problem.extra["field"], problem.extra["requested"]) == (field, requested)


def test_counts_and_strings_at_the_bound_pass() -> None:
    check_spec({}, service(labels=3, env=4, image="i" * 100), BOUNDS)


def test_a_long_string_the_old_spec_already_held_is_kept() -> None:
    long = "x" * 500
    check_spec(service(image=long), service(image=long, replicas=2), BOUNDS)
    refusal(lambda: check_spec(service(image=long), service(image=long + "y"), BOUNDS))


def test_deep_specs_are_walked_without_recursion() -> None:
    deep: Any = "x" * 101
    for _ in range(5000):
        deep = [deep]
    refusal(lambda: check_spec({}, {"Labels": {"a": deep}}, BOUNDS))


def test_patch_operations_and_merge_members_are_bounded() -> None:
    check_patch([{"op": "add", "path": f"/k{i}", "value": "v"} for i in range(5)], BOUNDS)
    problem = refusal(lambda: check_patch([{"op": "remove", "path": "/k"}] * 6, BOUNDS))
    assert problem.extra == {"field": "patch", "limit": 5, "requested": 6, "setting": "writes.max_patch_operations"}
    check_patch({"a": "1", "b": {"c": "2", "d": None}}, BOUNDS)                  # 4 members
    assert refusal(lambda: check_patch({"a": {"b": {"c": {"d": {"e": {}}}}}, "f": 1}, BOUNDS)
                   ).extra["requested"] == 6
