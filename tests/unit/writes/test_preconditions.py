"""The pieces under write preconditions and bodies: the If-Match list parser (RFC 9110 §13.1.1), the
registry of issued tags (bounded, judged by the object's spec), the nesting depth of a JSON text, and the
reserved-label rules."""

from __future__ import annotations

import json

import pytest

from app.cache.entries import Entry, build_entry
from app.errors import ProblemError
from app.http.conditional import parse_if_match
from app.http.issued_tags import IssuedTags
from app.http.writes import MAX_DEPTH, _decode_checked, nesting_depth
from app.resources import ResourceKind
from app.writes.labels import refuse_reserved_changes, reserved_changes, stack_of


@pytest.mark.parametrize(("header", "tags"), [
    ("*", None), (" * ", None), ('"a"', ['"a"']), ('"a", "b"', ['"a"', '"b"']), ('W/"a"', ['W/"a"']),
    ('"a",,"b",', ['"a"', '"b"']), ('"a,b"', ['"a,b"']), ('""', ['""']), ('\t"x-vnd.service.v1+json"',
                                                                          ['"x-vnd.service.v1+json"']),
])
def test_if_match_lists_parse_as_rfc_9110_says(header: str, tags: list[str] | None) -> None:
    assert parse_if_match(header) == tags


@pytest.mark.parametrize("header", ['"a", *', '*, "a"', "*,*", "a", '"a" "b"', '"a', "", ",", 'W/"a" x'])
def test_malformed_if_match_is_a_value_error(header: str) -> None:
    with pytest.raises(ValueError):
        parse_if_match(header)


def service(labels: dict[str, str], *, state: str = "running", version: int = 5) -> Entry:
    return build_entry(ResourceKind.SERVICE, {"ID": "s1", "Version": {"Index": version},
                                              "Spec": {"Name": "web", "Labels": labels},
                                              "UpdateStatus": {"State": state}})


def test_an_issued_tag_shows_the_object_until_its_spec_changes() -> None:
    registry = IssuedTags()
    registry.remember('"t1"', service({"a": "1"}))
    assert registry.shows_current('"t1"', service({"a": "1"}, state="updating", version=9))
    assert not registry.shows_current('"t1"', service({"a": "2"}))
    assert not registry.shows_current('"t2"', service({"a": "1"}))
    other = build_entry(ResourceKind.CONFIG, {"ID": "s1", "Spec": {"Name": "web", "Labels": {"a": "1"}}})
    assert not registry.shows_current('"t1"', other)


def test_the_registry_is_bounded() -> None:
    registry = IssuedTags(limit=3)
    for number in range(10):
        registry.remember(f'"t{number}"', service({}))
    registry.remember('"' + "x" * 500 + '"', service({}))     # too long: not kept
    assert len(registry) == 3
    assert registry.shows_current('"t9"', service({}))
    assert not registry.shows_current('"t0"', service({}))


@pytest.mark.parametrize(("text", "depth"), [
    (b"1", 0), (b"[]", 1), (b'{"a": [1, {"b": []}]}', 4), (b'["[[[[", "\\"{{"]', 1), (b"[" * 70 + b"]" * 70, 70),
])
def test_nesting_depth_ignores_brackets_in_strings(text: bytes, depth: int) -> None:
    assert nesting_depth(text) == depth


def test_decoding_refuses_depth_beyond_the_limit_and_keeps_wide_bodies() -> None:
    assert _decode_checked(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)[0] == "ok"
    assert _decode_checked(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)) == ("deep", None)
    assert _decode_checked(b"[" * 100_000) == ("deep", None)                       # RecursionError inside json
    wide = json.dumps([[[]] for _ in range(1000)]).encode()
    assert _decode_checked(wide)[0] == "ok"
    assert _decode_checked(b"{")[0] == "invalid"


def test_reserved_changes_name_added_changed_and_removed_stack_labels() -> None:
    stack = "com.docker.stack.namespace"
    assert reserved_changes({stack: "a", "x": "1"}, {stack: "a", "x": "2"}) == []
    assert reserved_changes({stack: "a"}, {stack: "b"}) == [stack]
    assert reserved_changes({stack: "a"}, {}) == [stack]
    assert reserved_changes({}, {"com.docker.stack.image": "i"}) == ["com.docker.stack.image"]
    assert reserved_changes({}, {"COM.DOCKER.STACK.namespace": "i"}) == []       # label keys are case-sensitive
    assert stack_of({stack: "demo"}) == "demo" and stack_of({stack: ""}) is None and stack_of({}) is None


def test_container_labels_are_reserved_too() -> None:
    before = {"Labels": {}, "TaskTemplate": {"ContainerSpec": {"Labels": {"com.docker.stack.namespace": "a"}}}}
    after = {"Labels": {}, "TaskTemplate": {"ContainerSpec": {"Labels": {}}}}
    with pytest.raises(ProblemError) as caught:
        refuse_reserved_changes(before, after)
    assert caught.value.code == "API017" and "container labels" in caught.value.detail
    refuse_reserved_changes(before, before)
    refuse_reserved_changes({}, {"Labels": {"team": "x"}})
