"""The frames a live stream's producer has made and its client has not yet taken, bounded in BYTES.

Why bytes: a bound in frames let a slow reader of a service writing 1 MB lines hold a gigabyte (128 log
tails that never read took the worker from 148 to 836 MB). Here the producer waits (backpressure, nothing
lost) while :attr:`FrameQueue.max_bytes` or more are queued, so one stream holds at most ``max_bytes`` plus
one frame; what the producer does not read waits upstream (the engine's log file, the next Prometheus tick).
The consumer takes everything queued as one chunk, so a stream costs one write per wake-up, not per frame.
"""

from __future__ import annotations

from collections import deque

from gevent.event import Event

DEFAULT_MAX_BYTES = 256 * 1024
END = b""   # what :meth:`FrameQueue.take` returns once the producer has ended and every frame was taken


class FrameQueue:
    __slots__ = ("_frames", "_readable", "_writable", "ended", "max_bytes", "queued_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        self.ended = False
        self._frames: deque[bytes] = deque()
        self._readable = Event()
        self._writable = Event()
        self._writable.set()

    def put(self, frame: bytes) -> None:
        """Queue ``frame`` (the producer's side); waits while ``max_bytes`` or more are queued."""
        while self.queued_bytes >= self.max_bytes and not self.ended:
            self._writable.clear()
            self._writable.wait()
        if self.ended or not frame:
            return
        self._frames.append(frame)
        self.queued_bytes += len(frame)
        self._readable.set()

    def end(self) -> None:
        """No more frames (producer done, failed or killed); never waits. A waiting ``put`` returns."""
        self.ended = True
        self._readable.set()
        self._writable.set()

    def take(self, timeout: float) -> bytes | None:
        """Everything queued as one chunk; :data:`END` once ended and empty; None if nothing within ``timeout``."""
        if not self._frames and not self.ended:
            self._readable.clear()
            self._readable.wait(timeout)
        if self._frames:
            chunk = self._frames[0] if len(self._frames) == 1 else b"".join(self._frames)
            self._frames.clear()
            self.queued_bytes = 0
            self._writable.set()
            return chunk
        return END if self.ended else None
