"""Patch documents: RFC 7396 merge patch (the RFC's appendix A examples), RFC 6902 JSON Patch through
jsonpatch, and the relaxed string-map form with its error codes."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import ProblemError
from app.writes.patch import json_patch, map_json_patch, map_merge_patch, merge_patch

RFC7396_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7396_EXAMPLES)
def test_merge_patch_follows_rfc7396_appendix_a(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_does_not_touch_its_input() -> None:
    target = {"a": {"b": 1}}
    merge_patch(target, {"a": {"b": 2}})
    assert target == {"a": {"b": 1}}


def test_json_patch_applies_all_six_operations() -> None:
    doc = {"a": {"b": 1}, "l": [1, 2]}
    result = json_patch(doc, [{"op": "add", "path": "/a/c", "value": 2}, {"op": "remove", "path": "/a/b"},
                              {"op": "replace", "path": "/l/0", "value": 9}, {"op": "copy", "from": "/a/c",
                                                                              "path": "/d"},
                              {"op": "move", "from": "/d", "path": "/e"}, {"op": "test", "path": "/e", "value": 2}])
    assert result == {"a": {"c": 2}, "l": [9, 2], "e": 2}
    assert doc == {"a": {"b": 1}, "l": [1, 2]}


@pytest.mark.parametrize(("ops", "code"), [
    ([{"op": "test", "path": "/a", "value": 2}], "API010"),
    ([{"op": "remove", "path": "/missing"}], "API011"),
    ([{"op": "frob", "path": "/a"}], "API011"),
    ({"op": "add"}, "API011"),
    (["add"], "API011"),
])
def test_json_patch_failures_have_codes(ops: Any, code: str) -> None:
    with pytest.raises(ProblemError) as raised:
        json_patch({"a": 1}, ops)
    assert raised.value.code == code


def test_map_json_patch_follows_the_reference_rules() -> None:
    result = map_json_patch({"A": "1", "B": "2", "a/b": "x"}, [
        {"op": "add", "path": "/C", "value": "3"}, {"op": "replace", "path": "A", "value": "9"},
        {"op": "remove", "path": "/B"}, {"op": "test", "path": "/C", "value": "3"},
        {"op": "remove", "path": "/a~1b"}])
    assert result == {"A": "9", "C": "3"}


@pytest.mark.parametrize(("ops", "code"), [
    ([{"op": "test", "path": "/A", "value": "2"}], "API010"),
    ([{"op": "replace", "path": "/Z", "value": "1"}], "API011"),
    ([{"op": "remove", "path": "/Z"}], "API011"),
    ([{"op": "move", "from": "/A", "path": "/B"}], "API011"),
    ([{"op": "copy", "from": "/A", "path": "/B"}], "API011"),
    ([{"op": "add", "path": "", "value": "1"}], "API011"),
    ([{"op": "add", "path": "/", "value": "1"}], "API011"),
    ([{"op": "add", "path": "/a/b", "value": "1"}], "API011"),
    ([{"op": "add", "path": "/A", "value": 1}], "API011"),
    ([{"op": "add", "path": "/A"}], "API011"),
    ({"op": "add"}, "API011"),
])
def test_map_json_patch_refusals(ops: Any, code: str) -> None:
    target = {"A": "1"}
    with pytest.raises(ProblemError) as raised:
        map_json_patch(target, ops)
    assert raised.value.code == code
    assert target == {"A": "1"}


def test_map_merge_patch_sets_and_deletes_strings() -> None:
    assert map_merge_patch({"A": "1", "B": "2"}, {"A": "x", "B": None, "C": "3"}) == {"A": "x", "C": "3"}
    for bad in ([], {"A": 1}, {"A": {"b": "c"}}):
        with pytest.raises(ProblemError) as raised:
            map_merge_patch({}, bad)
        assert raised.value.code == "API006"
