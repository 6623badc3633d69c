"""Service and task logs from the engine: the HTTP calls, the frame demultiplexer, cooperative reading.

The engine answers ``GET /services/{id}/logs`` and ``GET /tasks/{id}/logs`` with a chunked body. Without a
TTY it is multiplexed: frames of an 8-byte header (stream byte 1 stdout / 2 stderr, three zero bytes, a
big-endian payload length) and the payload, one log line each; with a TTY it is the raw text. The SDK's
``service_logs`` hides the HTTP response behind a generator that cannot be closed from outside, so this
module issues the same GET through the low-level client and keeps the response: closing it is how a live
tail ends when its client goes away (the producer greenlet is killed and its ``finally`` closes it).

Reading is cooperative: the socket is gevent's, each read returns at most :data:`CHUNK` bytes of one HTTP
chunk (the engine sends one per write, so a live line is handed over as soon as it arrives), and the lines
of one chunk are parsed in one go (bounded work on the hub). A swarm service's follow stream picks up the
tasks that replace old ones (measured on Engine 20.10 with ``since``; with ``tail=0`` a new task's first
lines are lost, hence "only new lines" is asked as ``since=<now>``).

Errors: :class:`LogsUnavailable` (cannot open: LOG008 live, LOG006 one-shot), :class:`LogReadFailed`
(LOG006), :class:`FrameError` (LOG007), :class:`LogTargetGone` (the engine no longer has the object: 404).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests
import urllib3.exceptions

from app.logs.lines import STDERR, STDOUT, LineFormatError, LogLine, parse_line
from app.logs.timestamps import engine_since

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
HEADER = 8
MAX_FRAME = 16 * 1024 * 1024          # the engine splits lines at 16 KiB; anything near this is garbage
CONNECT_TIMEOUT = 10.0
ONE_SHOT_IDLE = 2.0                    # a one-shot read is cut this long after the last frame
_STREAM_NAMES = {1: STDOUT, 2: STDERR, 0: STDOUT}   # 0 (stdin) never carries logs; tolerated as stdout
# Stream 3 is the engine's own message inside the stream ("systemerr"): for a service or task it says which
# logs it could not retrieve ("task ... has not been scheduled" for a pending task, a node that is down). The
# lines it did retrieve are valid, so the message is logged and skipped, not a failed read: a pending task
# has no lines, which is an empty answer, not an error.
_SYSTEM = 3


class FrameError(ValueError):
    """Bytes that are neither a multiplexed frame nor a timestamped line (LOG007)."""


class LogsUnavailable(Exception):
    """The engine did not open the log stream (connection failed, 5xx, or it refused the request)."""


class LogReadFailed(Exception):
    """The engine's log stream broke off with an error (not a clean end, not the idle cut)."""


class LogTargetGone(LookupError):
    """The engine answered 404: the service or task is gone."""


class FrameDecoder:
    """Incremental demultiplexer: feed any slices of the stream, get whole ``(stream, payload)`` frames."""

    __slots__ = ("_buffer", "engine_messages")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.engine_messages = 0

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        buffer = self._buffer
        buffer += data
        frames: list[tuple[str, bytes]] = []
        position = 0
        while len(buffer) - position >= HEADER:
            kind = buffer[position]
            if (kind not in _STREAM_NAMES and kind != _SYSTEM) or buffer[position + 1:position + 4] != b"\0\0\0":
                raise FrameError(f"bad frame header {bytes(buffer[position:position + HEADER])!r}")
            size = int.from_bytes(buffer[position + 4:position + 8], "big")
            if size > MAX_FRAME:
                raise FrameError(f"frame of {size} bytes")
            end = position + HEADER + size
            if end > len(buffer):
                break
            if kind == _SYSTEM:
                if self.engine_messages < 3:   # one per retrieval problem; a few are enough to see why
                    log.info("engine message in a log stream", extra={
                        "engine_message": bytes(buffer[position + HEADER:min(end, position + HEADER + 500)])
                        .decode("utf-8", "replace").strip()})
                self.engine_messages += 1
            else:
                frames.append((_STREAM_NAMES[kind], bytes(buffer[position + HEADER:end])))
            position = end
        del buffer[:position]
        return frames

    @property
    def pending(self) -> int:
        return len(self._buffer)


class RawDecoder:
    """A TTY's stream: newline-separated text, all of it stdout."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        self._buffer += data
        cut = self._buffer.rfind(b"\n") + 1
        if cut == 0:
            if len(self._buffer) > MAX_FRAME:
                raise FrameError("TTY line without an end")
            return []
        text = bytes(self._buffer[:cut])
        del self._buffer[:cut]
        return [(STDOUT, line) for line in text.split(b"\n")[:-1]]

    @property
    def pending(self) -> int:
        return len(self._buffer)


def decode_lines(frames: list[tuple[str, bytes]]) -> list[LogLine]:
    """Frames → lines; a frame holding several lines (it happens with TTYs) gives several."""
    lines: list[LogLine] = []
    try:
        for stream, payload in frames:
            if b"\n" in payload[:-1]:
                lines.extend(parse_line(stream, part) for part in payload.split(b"\n") if part)
            elif payload:
                lines.append(parse_line(stream, payload))
    except LineFormatError as exc:
        raise FrameError(str(exc)) from exc
    return lines


@dataclass(frozen=True, slots=True)
class LogTarget:
    """Whose logs: ``collection`` is ``services`` or ``tasks``; ``tty`` from the cached spec."""

    collection: str
    object_id: str
    tty: bool = False


class LogReader:
    """One open engine log response; iterate :meth:`batches`, always :meth:`close` (idempotent)."""

    def __init__(self, response: requests.Response, tty: bool) -> None:
        self._response = response
        self._decoder: FrameDecoder | RawDecoder = RawDecoder() if tty else FrameDecoder()
        self.received = 0           # lines read so far

    def batches(self) -> Iterator[list[LogLine]]:
        """The lines of each chunk as it arrives; ends at the engine's end of stream (or the idle cut)."""
        try:
            for chunk in self._response.raw.stream(CHUNK, decode_content=False):
                lines = decode_lines(self._decoder.feed(chunk))
                if lines:
                    self.received += len(lines)
                    yield lines
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
            # Only a one-shot read has a read timeout: it is the cut after the last frame, not a failure.
            log.debug("one-shot log read cut after %.1f s idle: %s", ONE_SHOT_IDLE, exc)
        except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError) as exc:
            raise LogReadFailed(str(exc)) from exc

    def close(self) -> None:
        self._response.close()


class EngineLogs:
    """Opens log streams on the engine; one low-level client (its own pool, sized for the stream cap)."""

    def __init__(self, base_url: str, api_version: str, max_streams: int) -> None:
        self._base_url = base_url
        self._api_version = api_version
        self._max_streams = max_streams
        self._api: docker.APIClient | None = None

    @property
    def api(self) -> docker.APIClient:
        """Created on first use, inside the worker (never before gunicorn forks and gevent patches)."""
        if self._api is None:
            self._api = docker.APIClient(base_url=self._base_url, version=self._api_version,
                                         timeout=CONNECT_TIMEOUT,  # type: ignore[arg-type]
                                         max_pool_size=self._max_streams + 8)
        return self._api

    def open(self, target: LogTarget, *, follow: bool, since_ns: int | None = None, tail: int | None = None,
             stream: str | None = None) -> LogReader:
        """Open the log stream; a one-shot one (``follow=False``) reads with the idle cut."""
        params: dict[str, Any] = {
            "details": "1", "timestamps": "1", "follow": "1" if follow else "0",
            "stdout": "0" if stream == STDERR else "1", "stderr": "0" if stream == STDOUT else "1",
            "tail": "all" if tail is None else str(tail),
        }
        if since_ns is not None:
            params["since"] = engine_since(since_ns)
        api = self.api
        url = api._url(f"/{target.collection}/{{0}}/logs", target.object_id)  # type: ignore[attr-defined]
        timeout = (CONNECT_TIMEOUT, None if follow else ONE_SHOT_IDLE)
        try:
            response = api._get(url, params=params, stream=True, timeout=timeout)  # type: ignore[attr-defined]
        except (requests.exceptions.RequestException, OSError) as exc:
            raise LogsUnavailable(f"the engine did not answer: {exc}") from exc
        try:
            api._raise_for_status(response)  # type: ignore[attr-defined]
        except docker.errors.NotFound as exc:
            response.close()
            raise LogTargetGone(target.object_id) from exc
        except docker.errors.APIError as exc:
            response.close()
            raise LogsUnavailable(f"the engine refused the log request: {exc.explanation or exc}") from exc
        return LogReader(response, target.tty)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
