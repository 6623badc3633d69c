"""Labels as a sub-resource: reading the engine's map, PUT bodies (bare or wrapped), both patch types,
and the validation that runs before any engine call."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import ProblemError
from app.writes import labels
from app.writes.operations import JSON_PATCH, MERGE_PATCH


def code_of(call: Any) -> str:
    with pytest.raises(ProblemError) as caught:
        call()
    return caught.value.code


def test_current_reads_spec_labels_and_defaults_to_an_empty_map() -> None:
    assert labels.current({"Spec": {"Labels": {"a": "1"}}}) == {"a": "1"}
    assert labels.current({"Spec": {}}) == {}
    assert labels.current({}) == {}
    assert labels.current({"Spec": {"Labels": None}}) == {}


def test_put_takes_a_bare_or_a_wrapped_map() -> None:
    assert labels.from_put({"tier": "db", "zone": "a"}) == {"tier": "db", "zone": "a"}
    assert labels.from_put({"labels": {"tier": "db"}}) == {"tier": "db"}
    assert labels.from_put({"labels": {}}) == {}
    assert labels.from_put({}) == {}
    # a label named "labels" with a string value is a bare map
    assert labels.from_put({"labels": "x"}) == {"labels": "x"}


@pytest.mark.parametrize("body", [[], "x", 3, None, {"a": 1}, {"a": None}, {"": "v"}, {" ": "v"},
                                  {"labels": {"a": 1}}, {"k" * 1025: "v"}])
def test_put_refuses_anything_but_a_string_map(body: Any) -> None:
    assert code_of(lambda: labels.from_put(body)) == "API006"


def test_json_patch_adds_replaces_removes_and_tests() -> None:
    start = {"a": "1", "b": "2"}
    result = labels.from_patch(start, JSON_PATCH, [
        {"op": "test", "path": "/a", "value": "1"}, {"op": "replace", "path": "/a", "value": "10"},
        {"op": "remove", "path": "b"}, {"op": "add", "path": "/c~1d", "value": "3"}])
    assert result == {"a": "10", "c/d": "3"}
    assert start == {"a": "1", "b": "2"}   # not mutated


def test_json_patch_failures_keep_their_codes() -> None:
    assert code_of(lambda: labels.from_patch({}, JSON_PATCH, [{"op": "remove", "path": "/x"}])) == "API011"
    assert code_of(lambda: labels.from_patch({}, JSON_PATCH, [{"op": "move", "from": "/a", "path": "/b"}])) == "API011"
    assert code_of(lambda: labels.from_patch({"a": "1"}, JSON_PATCH, [{"op": "test", "path": "/a", "value": "2"}])) \
        == "API010"
    assert code_of(lambda: labels.from_patch({}, JSON_PATCH, {"op": "add"})) == "API011"


def test_merge_patch_sets_and_removes() -> None:
    assert labels.from_patch({"a": "1", "b": "2"}, MERGE_PATCH, {"a": None, "c": "3"}) == {"b": "2", "c": "3"}
    assert code_of(lambda: labels.from_patch({}, MERGE_PATCH, {"a": 1})) == "API006"
    assert code_of(lambda: labels.from_patch({}, MERGE_PATCH, ["x"])) == "API006"
    assert code_of(lambda: labels.from_patch({}, MERGE_PATCH, {"": "v"})) == "API006"


def test_other_media_types_are_415() -> None:
    assert code_of(lambda: labels.from_patch({}, "application/json", {})) == "API004"


def test_with_labels_replaces_only_the_labels() -> None:
    spec = {"Name": "n", "Labels": {"old": "1"}, "Role": "worker"}
    assert labels.with_labels(spec, {"new": "2"}) == {"Name": "n", "Labels": {"new": "2"}, "Role": "worker"}


def test_a_map_with_labels_and_other_keys_is_bare() -> None:
    assert code_of(lambda: labels.from_put({"labels": {"a": "1"}, "b": "2"})) == "API006"   # dict value in a bare map
