"""LogLine parsing from engine payloads (app.logs.lines)."""

from __future__ import annotations

import pytest

from app.logs.lines import LineFormatError, LogLine, decode_json_message, label_of, parse_line
from app.logs.timestamps import NS_PER_SECOND

DETAILS = (b"com.docker.swarm.node.id=n1,com.docker.swarm.service.id=s1,com.docker.swarm.task.id=t1")


def test_a_swarm_line_with_details() -> None:
    line = parse_line("stderr", b"2026-11-25T17:13:22.609519261Z " + DETAILS + b" warn 314\n")
    assert line.ns % NS_PER_SECOND == 609_519_261
    assert line.timestamp == "2026-11-25T17:13:22.609519261Z"
    assert (line.stream, line.message) == ("stderr", "warn 314")
    assert line.attrs == {"nodeId": "n1", "serviceId": "s1", "taskId": "t1"}


def test_empty_details_and_spaces_in_the_message() -> None:
    line = parse_line("stdout", b"2026-11-25T17:13:22.000000001Z  two  spaces kept \r\n")
    assert line.attrs == {}
    assert line.message == "two  spaces kept "


def test_extra_attributes_are_unescaped() -> None:
    line = parse_line("stdout", b"2026-11-25T17:13:22Z com.docker.swarm.task.id=t1,env%3Dx=a%2Cb+c msg")
    assert line.attrs == {"taskId": "t1", "env=x": "a,b c"}


def test_without_details() -> None:
    line = parse_line("stdout", b"2026-11-25T17:13:22Z hello world", details=False)
    assert (line.message, line.attrs) == ("hello world", {})


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert parse_line("stdout", b"2026-11-25T17:13:22Z  caf\xe9").message == "caf\ufffd"


@pytest.mark.parametrize("payload", [b"hello world\n", b"", b"17:13:22 x y"])
def test_a_payload_without_timestamp_is_a_format_error(payload: bytes) -> None:
    with pytest.raises(LineFormatError):
        parse_line("stdout", payload)


def test_json_messages_are_recognised() -> None:
    line = parse_line("stdout", b'2026-11-25T17:13:22Z  {"level":"warn","msg":"disk","free":3}')
    body = line.to_json()
    assert body["json"] == {"level": "warn", "msg": "disk", "free": 3}
    assert body["message"] == '{"level":"warn","msg":"disk","free":3}'


@pytest.mark.parametrize("message", ["not json", "[1, 2]", "{broken", '"{}"', "{" + "x" * 70_000 + "}"])
def test_other_messages_have_no_json_member(message: str) -> None:
    assert decode_json_message(message) is None
    assert "json" not in LogLine(0, "stdout", message).to_json()


def test_json_shape_and_text_line() -> None:
    line = LogLine(1_775_000_000 * NS_PER_SECOND + 7, "stdout", "hi",
                   {"taskId": "t1", "serviceName": "web", "slot": 2})
    assert line.to_json() == {"timestamp": "2026-03-31T23:33:20.000000007Z", "message": "hi", "stream": "stdout",
                              "attrs": {"taskId": "t1", "serviceName": "web", "slot": 2}}
    assert line.to_text() == "2026-03-31T23:33:20.000000007Z web.2 stdout hi"
    assert "attrs" not in LogLine(0, "stderr", "x").to_json()


def test_labels_fall_back_to_node_then_task() -> None:
    assert label_of({"serviceName": "agent", "nodeId": "n1"}) == "agent.n1"
    assert label_of({"taskId": "t1"}) == "t1"
    assert label_of({}) == "-"
