"""The engine frame demultiplexer and line decoding (app.engine.logs), fed in arbitrary slices."""

from __future__ import annotations

import pytest

from app.engine.logs import MAX_FRAME, FrameDecoder, FrameError, RawDecoder, decode_lines


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


LINE_OUT = b"2026-11-25T17:13:22.609519261Z com.docker.swarm.task.id=t1 tick 1\n"
LINE_ERR = b"2026-11-25T17:13:22.609585109Z com.docker.swarm.task.id=t1 warn 1\n"
STREAM = frame(1, LINE_OUT) + frame(2, LINE_ERR) + frame(1, b"")


def test_whole_frames_at_once() -> None:
    assert FrameDecoder().feed(STREAM) == [("stdout", LINE_OUT), ("stderr", LINE_ERR), ("stdout", b"")]


@pytest.mark.parametrize("size", [1, 3, 7, 8, 9, 50])
def test_any_slicing_gives_the_same_frames(size: int) -> None:
    decoder = FrameDecoder()
    frames = []
    for start in range(0, len(STREAM), size):
        frames += decoder.feed(STREAM[start:start + size])
    assert frames == FrameDecoder().feed(STREAM)
    assert decoder.pending == 0


def test_a_partial_frame_waits_for_the_rest() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM[:12]) == []
    assert decoder.pending == 12


@pytest.mark.parametrize("data", [b"2026-11-25T17:13:22Z plain text", frame(1, b"x")[:1] + b"\1\0\0" + b"\0" * 5,
                                  bytes([9, 0, 0, 0, 0, 0, 0, 1]) + b"x"])
def test_garbage_is_a_frame_error(data: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(data)


def test_an_absurd_frame_size_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(bytes([1, 0, 0, 0]) + (MAX_FRAME + 1).to_bytes(4, "big"))


def test_tty_streams_split_on_newlines() -> None:
    decoder = RawDecoder()
    assert decoder.feed(LINE_OUT[:20]) == []
    assert decoder.feed(LINE_OUT[20:] + LINE_ERR[:5]) == [("stdout", LINE_OUT[:-1])]
    assert decoder.pending == 5


def test_decode_lines_parses_and_skips_empty_frames() -> None:
    lines = decode_lines(FrameDecoder().feed(STREAM))
    assert [(line.stream, line.message) for line in lines] == [("stdout", "tick 1"), ("stderr", "warn 1")]


def test_a_frame_holding_two_lines_gives_two() -> None:
    lines = decode_lines([("stdout", LINE_OUT + LINE_ERR)])
    assert [line.message for line in lines] == ["tick 1", "warn 1"]


def test_an_untimestamped_payload_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        decode_lines([("stdout", b"no timestamp here\n")])


def test_the_engines_own_message_is_skipped_not_a_failure() -> None:
    """Stream 3: what a pending task's logs carry ("task ... has not been scheduled"): no lines, no error."""
    message = b"Error grabbing logs: rpc error: code = Unknown desc = warning: incomplete log stream. some logs " \
              b"could not be retrieved for the following reasons: task t2 has not been scheduled\n"
    decoder = FrameDecoder()
    assert decoder.feed(frame(1, LINE_OUT) + frame(3, message) + frame(2, LINE_ERR)) == [
        ("stdout", LINE_OUT), ("stderr", LINE_ERR)]
    assert decoder.engine_messages == 1
